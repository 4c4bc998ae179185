// startServer runs `bin serve --model file --port 0 ...args` on 127.0.0.1
// and resolves, once it prints its ready line, to { proc, exited, url }:
// exited resolves to the exit { code, signal }. Both SDK suites
// (suites/sdk, suites/anthropic-sdk) start their servers with it.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export async function startServer(bin, file, args) {
  const proc = spawn(bin, ['serve', '--model', file, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const lines = createInterface({ input: proc.stdout });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no ready line from ninfer serve within 30s')), 30000);
    lines.on('line', (line) => {
      const m = /^ninfer serve: ready on (\S+)/.exec(line);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', (code) => reject(new Error(`ninfer serve exited with ${code} before it was ready`)));
  });
  return { proc, exited, url };
}

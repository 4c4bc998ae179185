// The official OpenAI Node SDK sends images to `ninfer serve --mmproj`.
//
// NINFER is the binary (as sdk.test.mjs); VL_MODEL and MMPROJ (defaults in
// ../../../shared/models) the vision-language model and its tower, and
// GOLDEN (default ../../../shared/golden) the llama.cpp goldens whose
// sq64_describe case the answers must reproduce.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer } from './serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const shared = path.join(here, '..', '..', '..', 'shared');
const bin = process.env.NINFER ?? path.join(here, '..', '..', 'bin', 'ninfer');
const modelFile = process.env.VL_MODEL ?? path.join(shared, 'models', 'tiny-qwen35-vl-f32.gguf');
const mmproj = process.env.MMPROJ ?? path.join(shared, 'models', 'tiny-qwen35-mmproj-f32.gguf');
const goldenDir = process.env.GOLDEN ?? path.join(shared, 'golden');
const model = 'vl';

let server, client;
const golden = JSON.parse(readFileSync(path.join(goldenDir, 'vision-tiny-qwen35.json'), 'utf8'));
const dataURL = (name) => `data:image/png;base64,${readFileSync(path.join(goldenDir, 'images', name)).toString('base64')}`;

before(async () => {
  server = await startServer(bin, modelFile, ['--mmproj', mmproj, '--model-id', model, '--threads', '1']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  server.proc.kill('SIGTERM');
  const { code, signal } = await server.exited;
  assert.equal(code, 0, `ninfer serve exited with code ${code} signal ${signal} after SIGTERM`);
});

// ask sends one user message with an image (a data URL) and a text part.
async function ask(url, text) {
  return client.chat.completions.create({
    model, max_tokens: 32, temperature: 0, ignore_eos: true, skip_special_tokens: false,
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text }] }],
  });
}

test('an image as a data URL gives llama.cpp greedy text, twice', async () => {
  const want = golden.results.find((r) => r.id === 'sq64_describe');
  const first = await ask(dataURL('sq64.png'), 'Describe this image.');
  assert.equal(first.choices[0].message.content, want.generated_text);
  assert.equal(first.usage.prompt_tokens, want.n_prompt_tokens);
  const again = await ask(dataURL('sq64.png'), 'Describe this image.');
  assert.equal(again.choices[0].message.content, want.generated_text);
  // The second request reuses the cached prompt past the image.
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, `cached ${JSON.stringify(again.usage)}`);
});

test('another image gives its own golden text', async () => {
  const want = golden.results.find((r) => r.id === 'pad_describe');
  const res = await ask(dataURL('pad100x90.png'), 'Describe this image.');
  assert.equal(res.choices[0].message.content, want.generated_text);
  // Nothing of sq64's cached prompt past the text before the image.
  assert.ok((res.usage.prompt_tokens_details?.cached_tokens ?? 0) < 5, `cached ${JSON.stringify(res.usage)}`);
});

test('a remote image URL is a 400 naming the field', async () => {
  await assert.rejects(ask('https://example.com/cat.png', 'Describe this image.'), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.param, 'messages[0].content[0].image_url.url');
    return true;
  });
});

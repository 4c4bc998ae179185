// Three agent frameworks with zod schemas against a live `ninfer serve` on
// 127.0.0.1: the OpenAI Agents SDK, the Vercel AI SDK and LangChain JS
// (versions pinned in package-lock.json). Each asks for structured output
// and forces a tool call; the random-weight model writes gibberish, but the
// grammar-constrained sampler keeps it inside the schema, so zod must
// accept every output.
//
// NINFER (default ../../bin/ninfer) is the binary; MODEL (default
// ../../../shared/models/tiny-qwen3-f32.gguf) the model, served with
// Qwen3's chat template (tools, tool calls) without thinking, as an
// instruct model's, written by ../sdk/toolmodel: a thinking template lets
// the model think freely before the constrained answer, and the random
// model's thoughts would take most of max_tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import OpenAI from 'openai';
import { Agent, run, tool as agentTool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, tool as aiTool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { startServer } from '../sdk/serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..', '..');
const bin = process.env.NINFER ?? path.join(root, 'bin', 'ninfer');
const modelFile = process.env.MODEL ?? path.join(root, '..', 'shared', 'models', 'tiny-qwen3-f32.gguf');
const model = 'tiny-qwen3-tools';
const apiKey = 'frameworks-suite-key';
const maxTokens = 700;

let server, baseURL;

// instructTemplate is Qwen3's template without its <think> markup (the
// generation prompt opens no thinking block), as an instruct model's.
function instructTemplate() {
  const qwen3 = readFileSync(path.join(root, 'runtime', 'tok', 'testdata', 'chat', 'qwen3.jinja'), 'utf8');
  const from = "{%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}";
  assert.ok(qwen3.includes(from), "qwen3.jinja's generation prompt changed: update instructTemplate");
  return qwen3.replace(from, '').replaceAll('<think>', '<reasoning>').replaceAll('</think>', '</reasoning>');
}

before(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ninfer-frameworks-'));
  const template = path.join(dir, 'instruct.jinja');
  writeFileSync(template, instructTemplate());
  const file = path.join(dir, `${model}.gguf`);
  execFileSync('go', ['run', './toolmodel', '-in', modelFile, '-template', template, '-out', file],
    { cwd: path.join(here, '..', 'sdk'), stdio: 'inherit' });
  server = await startServer(bin, file, ['--api-key', apiKey, '--max-concurrency', '4', '--threads', '1', '--drain-grace', '0s']);
  baseURL = `${server.url}/v1`;
});

after(async () => {
  if (!server) return;
  server.proc.kill('SIGTERM');
  const { code, signal } = await server.exited;
  assert.equal(code, 0, `ninfer serve exited with code ${code} signal ${signal} after SIGTERM`);
});

// Person uses what real schemas use: .int(), .positive(), .email(),
// .uuid(), .datetime(), an enum, optional and nested fields (string
// lengths bounded so that gibberish ends within maxTokens).
const Person = z.object({
  id: z.string().uuid(),
  email: z.string().email(),
  age: z.number().int().positive(),
  born: z.string().datetime(),
  role: z.enum(['admin', 'editor', 'viewer']),
  nickname: z.string().max(16).optional(),
  address: z.object({ city: z.string().max(24), zip: z.string().max(10).optional() }),
});
// The Agents SDK writes strict schemas, where every property is required:
// optional fields are nullable there.
const StrictPerson = Person.extend({
  nickname: z.string().max(16).nullable(),
  address: z.object({ city: z.string().max(24), zip: z.string().max(10).nullable() }),
});
const prompt = 'Describe a person.';

// checkPerson parses v with schema (zod's own validation) and checks that
// the fields zod reads as strings carry their formats.
function checkPerson(schema, v) {
  const p = schema.parse(v);
  assert.match(p.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  assert.ok(Number.isInteger(p.age) && p.age > 0);
  assert.ok(!Number.isNaN(Date.parse(p.born)), `born ${p.born}`);
  return p;
}

// Each framework on both of the OpenAI APIs it speaks.
const apis = ['chat_completions', 'responses'];

for (const api of apis) test(`OpenAI Agents SDK (${api}): outputType and a forced tool call`, async () => {
  setTracingDisabled(true);
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0 }));
  setOpenAIAPI(api);
  const writer = new Agent({ name: 'writer', instructions: 'Describe people.', model, outputType: StrictPerson,
    modelSettings: { maxTokens, temperature: 1 } });
  for (let i = 0; i < 2; i++) {
    const r = await run(writer, prompt);
    checkPerson(StrictPerson, r.finalOutput);
  }

  const saved = [];
  const save = agentTool({ name: 'save_person', description: 'Save a person', parameters: StrictPerson,
    execute: async (person) => { saved.push(person); return 'saved'; } });
  const clerk = new Agent({ name: 'clerk', instructions: 'Save people.', model, tools: [save],
    toolUseBehavior: 'stop_on_first_tool', modelSettings: { maxTokens, temperature: 1, toolChoice: 'save_person' } });
  const r = await run(clerk, prompt);
  assert.equal(r.finalOutput, 'saved');
  assert.ok(saved.length >= 1); // a forced call may come with parallel ones
  for (const person of saved) checkPerson(StrictPerson, person);
});

for (const api of apis) test(`Vercel AI SDK (${api}): generateObject and a forced tool call`, async () => {
  const openai = createOpenAI({ baseURL, apiKey });
  const llm = api === 'responses' ? openai.responses(model) : openai.chat(model);
  for (const seed of [1, 2]) {
    const { object } = await generateObject({ model: llm, schema: Person, prompt, maxOutputTokens: maxTokens, temperature: 1, seed, maxRetries: 0 });
    checkPerson(Person, object);
  }

  for (const toolChoice of ['required', { type: 'tool', toolName: 'save_person' }]) {
    const r = await generateText({ model: llm, prompt, maxOutputTokens: maxTokens, temperature: 1, maxRetries: 0, toolChoice,
      tools: { save_person: aiTool({ description: 'Save a person', inputSchema: Person }) } });
    assert.equal(r.finishReason, 'tool-calls');
    assert.ok(r.toolCalls.length >= 1); // a forced call may come with parallel ones
    for (const call of r.toolCalls) {
      assert.equal(call.toolName, 'save_person');
      checkPerson(Person, call.input);
    }
  }
});

for (const api of apis) test(`LangChain (${api}): withStructuredOutput and a forced tool call`, async () => {
  const llm = new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxTokens, temperature: 1, maxRetries: 0,
    useResponsesApi: api === 'responses' });
  for (const method of ['jsonSchema', 'functionCalling']) {
    const out = await llm.withStructuredOutput(Person, { name: 'person', method }).invoke(prompt);
    checkPerson(Person, out);
  }

  const bound = llm.bindTools([{ name: 'save_person', description: 'Save a person', schema: Person }], { tool_choice: 'save_person' });
  const msg = await bound.invoke(prompt);
  assert.ok(msg.tool_calls.length >= 1); // a forced call may come with parallel ones
  for (const call of msg.tool_calls) {
    assert.equal(call.name, 'save_person');
    checkPerson(Person, call.args);
  }
});

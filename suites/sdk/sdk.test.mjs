// The official OpenAI Node SDK against a live `ninfer serve` on 127.0.0.1.
//
// NINFER (default ../../bin/ninfer) is the binary; MODEL (default
// ../../../shared/models/tiny-qwen3-f32.gguf) the model it serves. The server
// listens on a free port and is stopped with SIGTERM at the end, which must
// drain and exit 0.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { makeParseableResponseFormat } from 'openai/lib/parser';
import { startServer as startServerAt } from './serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.NINFER ?? path.join(here, '..', '..', 'bin', 'ninfer');
const modelFile = process.env.MODEL ?? path.join(here, '..', '..', '..', 'shared', 'models', 'tiny-qwen3-f32.gguf');
const model = path.basename(modelFile, '.gguf');
const apiKey = 'sdk-suite-key';

let server, exited, baseURL, client;
// The tool-calling server: the same model with Qwen3's chat template
// (tools, tool calls, thinking), written by ./toolmodel with the Go GGUF writer.
let tools;
const toolModel = 'tiny-qwen3-tools';

async function startServer(file) {
  const { proc, exited, url } = await startServerAt(bin, file, ['--api-key', apiKey, '--max-concurrency', '16', '--threads', '1']);
  return { proc, exited, baseURL: url, client: new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 }) };
}

before(async () => {
  ({ proc: server, exited, baseURL, client } = await startServer(modelFile));
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'ninfer-sdk-')), `${toolModel}.gguf`);
  execFileSync('go', ['run', './toolmodel', '-in', modelFile, '-template',
    path.join(here, '..', '..', 'runtime', 'tok', 'testdata', 'chat', 'qwen3.jinja'), '-out', file], { cwd: here, stdio: 'inherit' });
  tools = await startServer(file);
});

after(async () => {
  for (const s of [{ proc: server, exited }, tools]) {
    s.proc.kill('SIGTERM');
    const { code, signal } = await s.exited;
    assert.equal(code, 0, `ninfer serve exited with code ${code} signal ${signal} after SIGTERM`);
  }
});

const user = [{ role: 'user', content: 'Tell me a story.' }];

async function health() {
  const res = await fetch(`${baseURL}/health`);
  assert.equal(res.status, 200);
  return res.json();
}

// waitIdle polls /health until no KV block is used and nothing runs.
async function waitIdle() {
  const deadline = Date.now() + 10000;
  for (;;) {
    const h = await health();
    if (h.kv_blocks_used === 0 && h.requests_running === 0 && h.requests_waiting === 0 && h.requests_in_flight === 0) return h;
    if (Date.now() > deadline) assert.fail(`server not idle: ${JSON.stringify(h)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('non-streaming chat', async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens);
});

test('streaming chat with include_usage', async () => {
  const want = await client.chat.completions.create({ model, messages: user, max_tokens: 16, temperature: 0 });
  const stream = await client.chat.completions.create({ model, messages: user, max_tokens: 16, temperature: 0,
    stream: true, stream_options: { include_usage: true } });
  let text = '';
  let first = true;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) { usage = chunk.usage; assert.equal(chunk.choices.length, 0); continue; }
    const c = chunk.choices[0];
    if (first) { assert.equal(c.delta.role, 'assistant'); first = false; }
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(text, want.choices[0].message.content);
  assert.equal(finish, want.choices[0].finish_reason);
  assert.deepEqual(usage, want.usage);
});

test('the .stream() helper', async () => {
  const runner = client.chat.completions.stream({ model, messages: user, max_tokens: 10, temperature: 0 });
  let deltas = '';
  runner.on('content', (d) => { deltas += d; });
  const done = await runner.finalChatCompletion();
  assert.equal(done.choices[0].message.content, deltas);
  assert.ok(['stop', 'length'].includes(done.choices[0].finish_reason));
});

test('completions', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8);
});

test('n=2 gives two choices', async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 8, n: 2, seed: 5, temperature: 1 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  const again = await client.chat.completions.create({ model, messages: user, max_tokens: 8, n: 2, seed: 5, temperature: 1 });
  assert.deepEqual(again.choices.map((c) => c.message.content), r.choices.map((c) => c.message.content), 'same seed, same choices');
});

test('logprobs', async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].token, e.token, 'greedy picks the most likely token');
    assert.ok(Array.isArray(e.bytes));
  }
});

test('stop sequences', async () => {
  const free = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
  const text = free.choices[0].text;
  assert.ok(text.length >= 8, `greedy text too short to pick a stop from: ${JSON.stringify(text)}`);
  const stop = text.slice(4, 7);
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0, stop: [stop, 'zzzz'] });
  assert.equal(r.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('an invalid request raises BadRequestError with our message', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: user, temperature: 7 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err}`);
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      assert.match(err.message, /Invalid 'temperature'/);
      return true;
    });
  await assert.rejects(client.chat.completions.create({ model: 'nope', messages: user }), OpenAI.NotFoundError);
  const noKey = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(noKey.models.list(), OpenAI.AuthenticationError);
});

test('10 concurrent streams', async () => {
  const runs = Array.from({ length: 10 }, async (_, i) => {
    const stream = await client.chat.completions.create({ model, messages: user, max_tokens: 20 + i, seed: i,
      stream: true, stream_options: { include_usage: true } });
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    }
    if (finish === 'length') assert.equal(usage.completion_tokens, 20 + i);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  });
  await Promise.all(runs);
  await waitIdle();
});

test('an aborted stream frees its KV', async () => {
  const before = await health();
  const stream = await client.chat.completions.create({ model, messages: user, max_tokens: 4000, temperature: 0, stream: true });
  let chunks = 0;
  for await (const _ of stream) {
    if (++chunks === 3) {
      const h = await health();
      assert.ok(h.kv_blocks_used > 0, 'the stream holds KV while it runs');
      stream.controller.abort();
    }
  }
  const h = await waitIdle();
  assert.equal(h.streams_aborted, before.streams_aborted + 1);
});

test('models', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

test('embeddings.create', async () => {
  // The SDK asks for base64 by default and decodes it; float must agree.
  const r = await client.embeddings.create({ model, input: ['hello world', 'a second input'] });
  assert.equal(r.data.length, 2);
  const first = r.data[0].embedding;
  assert.ok(first.length > 0);
  const norm = first.reduce((s, v) => s + v * v, 0);
  assert.ok(Math.abs(norm - 1) < 1e-4, `|embedding|^2 = ${norm}`);
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);
  const f = await client.embeddings.create({ model, input: 'hello world', encoding_format: 'float' });
  assert.deepEqual(f.data[0].embedding.map((v) => Math.fround(v)), first.map((v) => Math.fround(v)));
  await assert.rejects(client.embeddings.create({ model, input: 'x', dimensions: 3 }), OpenAI.BadRequestError);
});

// Tool calling on a model whose template uses tools. The random-weight
// model never calls a tool by itself: tool_choice 'required' and a named
// function force the call through the grammar-constrained sampler.
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
      required: ['city'], additionalProperties: false },
  },
};
const timeTool = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

function checkWeatherArgs(args) {
  const v = JSON.parse(args);
  assert.equal(typeof v.city, 'string');
  assert.ok(v.city.length <= 12);
  assert.ok(v.unit === undefined || ['c', 'f'].includes(v.unit));
  assert.deepEqual(Object.keys(v).filter((k) => !['city', 'unit'].includes(k)), []);
}

test('a tool call round trip: call, tool result, final answer', async () => {
  const c = tools.client;
  const r = await c.chat.completions.create({ model: toolModel, messages: ask, tools: [weatherTool, timeTool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 120, temperature: 0 });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.content, null);
  assert.equal(msg.tool_calls.length, 1);
  const call = msg.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_/);
  checkWeatherArgs(call.function.arguments);

  const final = await c.chat.completions.create({ model: toolModel, tools: [weatherTool, timeTool], max_tokens: 12, temperature: 0,
    messages: [...ask, msg, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 22}' }] });
  assert.equal(typeof final.choices[0].message.content, 'string');
  assert.ok(['stop', 'length', 'tool_calls'].includes(final.choices[0].finish_reason));
  assert.ok(final.usage.prompt_tokens > r.usage.prompt_tokens, 'the call and its result are in the prompt');
});

test('tool_choice required, streaming, through the .stream() helper', async () => {
  const runner = tools.client.chat.completions.stream({ model: toolModel, messages: ask, tools: [weatherTool, timeTool],
    tool_choice: 'required', parallel_tool_calls: false, max_tokens: 120, temperature: 0.8, seed: 3 });
  const done = await runner.finalChatCompletion();
  const msg = done.choices[0].message;
  assert.equal(done.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  assert.ok(['get_weather', 'get_time'].includes(msg.tool_calls[0].function.name));
  if (msg.tool_calls[0].function.name === 'get_weather') checkWeatherArgs(msg.tool_calls[0].function.arguments);
  else assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), {});
  assert.ok(!(msg.content ?? '').includes('<tool_call>'), 'no markup in content');
});

test('parse() with a strict tool parses the arguments', async () => {
  const r = await tools.client.chat.completions.parse({ model: toolModel, messages: ask, tools: [weatherTool],
    tool_choice: 'required', max_tokens: 120, temperature: 0 });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.parsed_arguments.city, JSON.parse(call.function.arguments).city);
});

test('structured output: parse() with a JSON schema', async () => {
  const schema = { type: 'object', properties: { title: { type: 'string', maxLength: 20 }, year: { type: 'integer' },
    genres: { type: 'array', items: { enum: ['drama', 'comedy'] }, maxItems: 2 } }, required: ['title', 'year'], additionalProperties: false };
  const format = makeParseableResponseFormat({ type: 'json_schema', json_schema: { name: 'movie', strict: true, schema } },
    (content) => JSON.parse(content));
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.parse({ model, messages: user, response_format: format, max_tokens: 80, temperature: 1, seed });
    const v = r.choices[0].message.parsed;
    assert.equal(typeof v.title, 'string');
    assert.ok(Number.isInteger(v.year));
    assert.ok(v.genres === undefined || v.genres.every((g) => ['drama', 'comedy'].includes(g)));
  }
  const obj = await client.chat.completions.create({ model, messages: user, response_format: { type: 'json_object' }, max_tokens: 120, temperature: 0 });
  assert.equal(typeof JSON.parse(obj.choices[0].message.content), 'object');
});

test('the fields vLLM and llama.cpp clients send', async () => {
  const r = await client.chat.completions.create({ model, messages: user, max_tokens: 9, min_tokens: 9, ignore_eos: true, temperature: 0,
    x_unknown_field: 'ignored' });
  assert.equal(r.usage.completion_tokens, 9);
  assert.equal(r.choices[0].finish_reason, 'length');
  const off = await tools.client.chat.completions.create({ model: toolModel, messages: user, max_tokens: 4,
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(typeof off.choices[0].message.content, 'string');
  const tok = await fetch(`${baseURL}/tokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ content: 'Hello world' }) });
  const { tokens } = await tok.json();
  const detok = await fetch(`${baseURL}/detokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ tokens }) });
  assert.equal((await detok.json()).content, 'Hello world');
  const list = await client.models.list();
  assert.ok(list.data[0].max_model_len > 0);
});

// The stateless Responses API.
test('responses.create', async () => {
  const r = await client.responses.create({ model, instructions: 'Tell stories.', input: 'Once upon a time', max_output_tokens: 16, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.equal(r.output_text, r.output[0].content[0].text);
  assert.ok(r.usage.input_tokens > 0);
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 16);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  await assert.rejects(client.responses.create({ model, input: 'hi', previous_response_id: 'resp_1' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
});

test('responses.create streaming', async () => {
  const want = await client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me a story.' }] }],
    max_output_tokens: 16, temperature: 0 });
  const stream = await client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me a story.' }] }],
    max_output_tokens: 16, temperature: 0, stream: true });
  let text = '';
  let seq = 0;
  let final = null;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq++);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assert.equal(text, want.output_text);
  assert.equal(final.status, want.status);
  assert.equal(final.output[0].content[0].text, text);
  assert.deepEqual(final.usage, want.usage);
});

test('responses: a tool call round trip', async () => {
  const c = tools.client;
  const tool = { type: 'function', name: 'get_weather', description: 'The weather in a city', strict: true,
    parameters: weatherTool.function.parameters };
  const r = await c.responses.create({ model: toolModel, input: 'What is the weather in Paris?', tools: [tool],
    tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 120, temperature: 0 });
  const calls = r.output.filter((it) => it.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  checkWeatherArgs(calls[0].arguments);
  const final = await c.responses.create({ model: toolModel, tools: [tool], max_output_tokens: 12, temperature: 0,
    input: [{ role: 'user', content: 'What is the weather in Paris?' }, ...r.output,
      { type: 'function_call_output', call_id: calls[0].call_id, output: '{"temperature": 22}' }] });
  assert.ok(final.usage.input_tokens > r.usage.input_tokens, 'the call and its result are in the prompt');
  assert.ok(final.output.length > 0);

  const stream = await c.responses.create({ model: toolModel, input: 'What is the weather in Paris?', tools: [tool],
    tool_choice: 'required', max_output_tokens: 120, temperature: 0, stream: true });
  let args = '';
  let done = null;
  for await (const ev of stream) {
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  const call = done.output.find((it) => it.type === 'function_call');
  assert.equal(call.arguments, args);
  checkWeatherArgs(args);
});

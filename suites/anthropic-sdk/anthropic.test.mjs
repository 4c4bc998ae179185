// The official Anthropic TypeScript SDK against a live `ninfer serve` on 127.0.0.1.
//
// NINFER (default ../../bin/ninfer) is the binary; MODEL (default
// ../../../shared/models/tiny-qwen3-f32.gguf) the model it serves. Each server
// listens on a free port and is stopped with SIGTERM at the end, which must
// drain and exit 0.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { startServer as startServerAt } from '../sdk/serve.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..', '..');
const bin = process.env.NINFER ?? path.join(root, 'bin', 'ninfer');
const modelFile = process.env.MODEL ?? path.join(root, '..', 'shared', 'models', 'tiny-qwen3-f32.gguf');
const model = path.basename(modelFile, '.gguf');
const apiKey = 'anthropic-suite-key';

// plain serves the model with its own template. thinker serves it with
// Qwen3's template (tools, tool calls) changed by `toolmodel
// -open-thinking` to open a <think> block in the generation prompt unless
// enable_thinking is false, as thinking-only templates do: the
// random-weight model never writes <think> itself.
let plain, thinker;
const thinkModel = 'tiny-qwen3-thinking';

async function startServer(file) {
  const s = await startServerAt(bin, file, ['--api-key', apiKey, '--max-concurrency', '8', '--threads', '1', '--drain-grace', '0s']);
  return { ...s, client: new Anthropic({ baseURL: s.url, apiKey, maxRetries: 0 }) };
}

before(async () => {
  plain = await startServer(modelFile);
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'ninfer-anthropic-')), `${thinkModel}.gguf`);
  execFileSync('go', ['run', './toolmodel', '-in', modelFile, '-template', path.join(root, 'runtime', 'tok', 'testdata', 'chat', 'qwen3.jinja'),
    '-open-thinking', '-out', file], { cwd: path.join(here, '..', 'sdk'), stdio: 'inherit' });
  thinker = await startServer(file);
});

after(async () => {
  for (const s of [plain, thinker]) {
    if (!s) continue;
    s.proc.kill('SIGTERM');
    const { code, signal } = await s.exited;
    assert.equal(code, 0, `ninfer serve exited with code ${code} signal ${signal} after SIGTERM`);
  }
});

const hello = [{ role: 'user', content: 'Tell me a story.' }];
const textOf = (msg) => msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
// billed is the prompt a message's usage bills: the tokens computed and
// those read from the prefix cache.
const billed = (usage) => usage.input_tokens + usage.cache_read_input_tokens;

test('a plain message', async () => {
  const m = await plain.client.messages.create({ model, max_tokens: 12, temperature: 0, messages: hello,
    system: [{ type: 'text', text: 'You tell stories.', cache_control: { type: 'ephemeral' } }], metadata: { user_id: 'u1' } });
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, model);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  assert.equal(m.stop_sequence, null);
  assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 12);
  assert.ok(billed(m.usage) > 0);
});

test('streaming through the stream helper: the final message is the accumulated deltas', async () => {
  const want = await plain.client.messages.create({ model, max_tokens: 16, temperature: 0, messages: hello });
  const stream = plain.client.messages.stream({ model, max_tokens: 16, temperature: 0, messages: hello });
  let deltas = '';
  const events = [];
  stream.on('text', (d) => { deltas += d; });
  stream.on('streamEvent', (e) => { events.push(e.type); });
  const done = await stream.finalMessage();
  assert.equal(textOf(done), deltas);
  assert.equal(deltas, textOf(want));
  assert.equal(done.stop_reason, want.stop_reason);
  assert.deepEqual(events.slice(0, 2), ['message_start', 'content_block_start']);
  assert.deepEqual(events.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(done.usage.output_tokens, want.usage.output_tokens);
  assert.equal(billed(done.usage), billed(want.usage));
});

test('usage equals what was streamed', async () => {
  const stream = await plain.client.messages.create({ model, max_tokens: 10, temperature: 0, messages: hello, stream: true });
  let start, delta, text = '';
  for await (const e of stream) {
    if (e.type === 'message_start') start = e.message.usage;
    if (e.type === 'message_delta') delta = e.usage;
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  }
  const count = await plain.client.messages.countTokens({ model, messages: hello });
  assert.equal(start.input_tokens, count.input_tokens, 'message_start bills the whole prompt before the cache is known');
  assert.equal(billed(delta), count.input_tokens);
  const again = await plain.client.messages.create({ model, max_tokens: 10, temperature: 0, messages: hello });
  assert.equal(delta.output_tokens, again.usage.output_tokens);
  assert.equal(text, textOf(again));
});

test('count_tokens equals the prompt the message then bills', async () => {
  for (const req of [
    { model, messages: hello },
    { model, system: 'Be brief.', messages: [...hello, { role: 'assistant', content: 'Once' }, { role: 'user', content: [{ type: 'text', text: 'Go on.' }] }] },
  ]) {
    const count = await plain.client.messages.countTokens(req);
    const m = await plain.client.messages.create({ ...req, max_tokens: 4, temperature: 0 });
    assert.ok(count.input_tokens > 0);
    assert.equal(billed(m.usage), count.input_tokens);
  }
});

// A long system prompt sent twice: the second message reads it from the
// prefix cache (cache_control is not needed: the cache is automatic), and
// still bills the whole prompt.
test('usage: cache_read_input_tokens count the prompt the prefix cache held', async () => {
  const req = { model, max_tokens: 4, temperature: 0, messages: hello,
    system: 'You tell short stories about the sea, the wind and the ships that sail on it. '.repeat(6) };
  const count = await plain.client.messages.countTokens(req);
  const first = await plain.client.messages.create(req);
  const second = await plain.client.messages.create(req);
  assert.equal(billed(first.usage), count.input_tokens);
  assert.equal(billed(second.usage), count.input_tokens);
  assert.ok(second.usage.cache_read_input_tokens >= 64, `second usage ${JSON.stringify(second.usage)}: the prefix cache held nothing`);
  assert.ok(second.usage.input_tokens < count.input_tokens);
  assert.equal(second.usage.cache_creation_input_tokens, 0);
});

test('top_k and top_p reach the sampler: top_k 1 is greedy at any temperature', async () => {
  const greedy = await plain.client.messages.create({ model, max_tokens: 24, temperature: 0, messages: hello });
  const topK = await plain.client.messages.create({ model, max_tokens: 24, temperature: 1, top_k: 1, messages: hello });
  assert.equal(textOf(topK), textOf(greedy));
  const topP = await plain.client.messages.create({ model, max_tokens: 24, temperature: 1, top_p: 1e-6, messages: hello });
  assert.equal(textOf(topP), textOf(greedy));
});

// The raw event stream, read through the SDK's transport: Anthropic's
// event order, the ping included, each event named by its type.
test('the stream: message_start, ping, content blocks, message_delta, message_stop', async () => {
  const res = await plain.client.messages.create({ model, max_tokens: 6, temperature: 0, messages: hello, stream: true }).asResponse();
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const names = [];
  for (const raw of (await res.text()).split('\n\n').filter((e) => e.trim())) {
    const name = /^event: (.*)$/m.exec(raw)[1];
    const data = JSON.parse(/^data: (.*)$/m.exec(raw)[1]);
    assert.equal(data.type, name);
    names.push(name);
  }
  const deltas = names.length - 6;
  assert.ok(deltas >= 1, names.join(' '));
  assert.deepEqual(names, ['message_start', 'ping', 'content_block_start', ...Array(deltas).fill('content_block_delta'),
    'content_block_stop', 'message_delta', 'message_stop']);
});

test('stop sequences end the text before them', async () => {
  const want = textOf(await plain.client.messages.create({ model, max_tokens: 24, temperature: 0, messages: hello }));
  const k = Math.floor(want.length / 2);
  const stop = want.slice(k, k + 3);
  const m = await plain.client.messages.create({ model, max_tokens: 24, temperature: 0, messages: hello, stop_sequences: [stop, 'never-generated'] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(textOf(m), want.slice(0, want.indexOf(stop)));
});

test('errors: missing max_tokens, a wrong key, an unknown model', async () => {
  await assert.rejects(plain.client.messages.create({ model, messages: hello }), (err) => {
    assert.ok(err instanceof Anthropic.BadRequestError);
    assert.equal(err.status, 400);
    assert.equal(err.error.type, 'error');
    assert.equal(err.error.error.type, 'invalid_request_error');
    assert.match(err.error.error.message, /max_tokens/);
    return true;
  });
  const wrong = new Anthropic({ baseURL: plain.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model, max_tokens: 4, messages: hello }), (err) => {
    assert.ok(err instanceof Anthropic.AuthenticationError);
    assert.equal(err.error.error.type, 'authentication_error');
    return true;
  });
  await assert.rejects(plain.client.messages.create({ model: 'claude-none', max_tokens: 4, messages: hello }), (err) => {
    assert.ok(err instanceof Anthropic.NotFoundError);
    assert.equal(err.error.error.type, 'not_found_error');
    return true;
  });
  const bearer = new Anthropic({ baseURL: plain.url, apiKey: null, authToken: apiKey, maxRetries: 0 });
  const m = await bearer.messages.create({ model, max_tokens: 2, messages: hello });
  assert.equal(m.type, 'message');
});

// Tool use on the Qwen3 template. The random-weight model never calls a
// tool by itself: tool_choice {type: 'tool'} forces the call through the
// grammar-constrained sampler.
const weatherTool = {
  name: 'get_weather', description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
    required: ['city'], additionalProperties: false },
};
const timeTool = { name: 'get_time', description: 'The time', input_schema: { type: 'object', properties: {} } };
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

// checkInput validates a tool_use block's input against its tool's
// input_schema with a JSON Schema validator.
const ajv = new Ajv({ strict: true });
const validators = new Map([weatherTool, timeTool].map((t) => [t.name, ajv.compile(t.input_schema)]));
function checkInput(use) {
  const validate = validators.get(use.name);
  assert.ok(validate, `a call of an unknown tool ${use.name}`);
  assert.ok(validate(use.input), `${use.name} input ${JSON.stringify(use.input)}: ${ajv.errorsText(validate.errors)}`);
}

test('a forced tool call (tool_choice type tool) and a tool_result round trip', async () => {
  const c = thinker.client;
  const req = { model: thinkModel, max_tokens: 120, temperature: 0, messages: ask, tools: [weatherTool, timeTool],
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }, thinking: { type: 'disabled' } };
  const m = await c.messages.create(req);
  assert.equal(m.stop_reason, 'tool_use');
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.equal(uses[0].name, 'get_weather');
  assert.match(uses[0].id, /^toolu_/);
  checkInput(uses[0]);
  const count = await c.messages.countTokens(req);
  assert.equal(billed(m.usage), count.input_tokens);

  const stream = c.messages.stream(req);
  let json = '';
  stream.on('inputJson', (d) => { json += d; });
  const streamed = await stream.finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  const use = streamed.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(use.input, JSON.parse(json));
  assert.deepEqual(use.input, uses[0].input);

  const turn = (result) => [...ask, { role: 'assistant', content: m.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: result }] }];
  const short = await c.messages.countTokens({ model: thinkModel, tools: [weatherTool, timeTool], messages: turn('18 C') });
  const long = await c.messages.countTokens({ model: thinkModel, tools: [weatherTool, timeTool],
    messages: turn([{ type: 'text', text: '18 C, sunny, light wind from the west' }]) });
  assert.ok(long.input_tokens > short.input_tokens, 'the tool result reaches the prompt');
  const final = await c.messages.create({ model: thinkModel, max_tokens: 8, temperature: 0, tools: [weatherTool, timeTool],
    thinking: { type: 'disabled' }, messages: turn('18 C') });
  assert.equal(final.type, 'message');
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(final.stop_reason));
  assert.equal(billed(final.usage), (await c.messages.countTokens({ model: thinkModel, tools: [weatherTool, timeTool],
    thinking: { type: 'disabled' }, messages: turn('18 C') })).input_tokens);
});

test('tool_choice any calls one of the tools; none calls none', async () => {
  const c = thinker.client;
  const base = { model: thinkModel, max_tokens: 120, temperature: 0, messages: ask, tools: [weatherTool, timeTool], thinking: { type: 'disabled' } };
  const any = await c.messages.create({ ...base, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
  assert.equal(any.stop_reason, 'tool_use');
  const uses = any.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.ok(['get_weather', 'get_time'].includes(uses[0].name), uses[0].name);
  checkInput(uses[0]);

  const none = await c.messages.create({ ...base, max_tokens: 16, tool_choice: { type: 'none' } });
  assert.ok(none.content.every((b) => b.type !== 'tool_use'), JSON.stringify(none.content));
  assert.notEqual(none.stop_reason, 'tool_use');

  // A failed tool's result (is_error) goes back like any other.
  const turn = [...ask, { role: 'assistant', content: any.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, is_error: true, content: [{ type: 'text', text: 'service down' }] }] }];
  const after = await c.messages.create({ ...base, max_tokens: 4, messages: turn });
  assert.equal(billed(after.usage), (await c.messages.countTokens({ model: thinkModel, tools: base.tools, thinking: base.thinking, messages: turn })).input_tokens);
});

test('thinking blocks on a thinking template', async () => {
  const c = thinker.client;
  const req = { model: thinkModel, max_tokens: 16, temperature: 0, messages: hello, thinking: { type: 'adaptive' } };
  const m = await c.messages.create(req);
  assert.equal(m.content[0].type, 'thinking');
  assert.ok(m.content[0].thinking.length > 0);
  assert.equal(typeof m.content[0].signature, 'string');

  const stream = c.messages.stream(req);
  let thinking = '';
  stream.on('thinking', (d) => { thinking += d; });
  const done = await stream.finalMessage();
  assert.equal(done.content[0].type, 'thinking');
  assert.equal(done.content[0].thinking, thinking);
  assert.deepEqual(done.content, m.content);

  // The thinking goes back as an assistant turn's thinking block.
  const next = await c.messages.create({ ...req, messages: [...hello, { role: 'assistant', content: m.content }, { role: 'user', content: 'More.' }] });
  assert.equal(next.type, 'message');

  const off = await c.messages.create({ ...req, thinking: { type: 'disabled' } });
  assert.ok(off.content.every((b) => b.type !== 'thinking'), `thinking disabled: ${JSON.stringify(off.content)}`);
});

// The model never closes its thinking by itself: budget_tokens is what
// ends it, and the reply goes on as text.
test('thinking.budget_tokens ends the thinking, then the reply is text', async () => {
  const c = thinker.client;
  const req = { model: thinkModel, max_tokens: 1040, temperature: 0, messages: hello };
  const unbounded = await c.messages.create({ ...req, thinking: { type: 'adaptive' } });
  assert.deepEqual(unbounded.content.map((b) => b.type), ['thinking']);
  const stream = c.messages.stream({ ...req, thinking: { type: 'enabled', budget_tokens: 1024 } });
  let text = '';
  stream.on('text', (d) => { text += d; });
  const m = await stream.finalMessage();
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(text.length > 0);
  assert.equal(m.content[1].text, text);
  assert.ok(unbounded.content[0].thinking.startsWith(m.content[0].thinking));
  assert.equal(m.usage.output_tokens, 1040);
});

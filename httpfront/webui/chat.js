// The chat view: streams /v1/chat/completions into the page, with the
// reasoning collapsed, tool calls shown, and a stop button that aborts the
// request (the server then frees the sequence).
import { api, sse } from './api.js';

const $ = (id) => document.getElementById(id);
const history = []; // the conversation sent with each request
let running = null; // AbortController of the request in flight
let model = ''; // the served model's id (/v1/models)
const RENDER_MS = 50;

// setModel sets the model the chat requests name.
export function setModel(id) {
  model = id;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function addMessage(role) {
  const m = el('div', 'msg ' + role);
  m.append(el('div', 'role', role));
  $('messages').append(m);
  return m;
}

function scrollDown() {
  const box = $('messages');
  box.scrollTop = box.scrollHeight;
}

// sampling reads the controls into request fields; empty ones are left out.
function sampling() {
  const out = {};
  for (const [id, parse] of [['temperature', parseFloat], ['top_p', parseFloat], ['top_k', parseInt], ['max_tokens', parseInt], ['seed', parseInt]]) {
    const v = $(id).value.trim();
    if (v !== '' && !Number.isNaN(parse(v))) out[id] = parse(v);
  }
  return out;
}

function tools() {
  const text = $('tools').value.trim();
  if (!text) return undefined;
  const v = JSON.parse(text);
  if (!Array.isArray(v)) throw new Error('tools must be a JSON array');
  return v;
}

// Reply renders one streamed assistant message.
class Reply {
  constructor() {
    this.box = addMessage('assistant');
    this.reasoningBox = el('details', 'reasoning hidden');
    this.reasoningBox.append(el('summary', '', 'Reasoning'));
    this.reasoningText = el('pre', 'reasoning-text');
    this.reasoningBox.append(this.reasoningText);
    this.text = el('div', 'content');
    this.toolsBox = el('div', 'tool-calls');
    this.meta = el('div', 'meta');
    this.box.append(this.reasoningBox, this.text, this.toolsBox, this.meta);
    this.content = '';
    this.reasoning = '';
    this.dirty = false; // text arrived since the last render
    this.calls = []; // {id, name, arguments, view}
    this.tokens = 0;
    this.first = 0;
  }

  delta(d) {
    if (!this.first) this.first = performance.now();
    if (d.reasoning_content) this.reasoning += d.reasoning_content;
    if (d.content) this.content += d.content;
    if ((d.reasoning_content || d.content) && !this.dirty) {
      this.dirty = true;
      setTimeout(() => this.render(), RENDER_MS);
    }
    for (const tc of d.tool_calls || []) {
      let c = this.calls[tc.index ?? this.calls.length];
      if (!c) {
        c = { id: tc.id || '', name: '', arguments: '', view: el('div', 'tool-call') };
        c.title = el('div', 'tool-name');
        c.args = el('pre', 'tool-args');
        c.view.append(c.title, c.args);
        this.toolsBox.append(c.view);
        this.calls[tc.index ?? this.calls.length] = c;
      }
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.name += tc.function.name;
      if (tc.function?.arguments) c.args.textContent = (c.arguments += tc.function.arguments);
      c.title.textContent = 'tool call: ' + c.name;
    }
    this.tokens++;
  }

  // render shows the text received so far: at most every RENDER_MS, so
  // that a fast stream leaves the page time to update its plots.
  render() {
    this.dirty = false;
    if (this.reasoning) {
      this.reasoningText.textContent = this.reasoning;
      this.reasoningBox.classList.remove('hidden');
    }
    this.text.textContent = this.content;
    scrollDown();
  }

  finish(reason, usage, started) {
    this.render();
    const parts = [];
    const n = usage ? usage.completion_tokens : this.tokens;
    parts.push(n + ' tokens');
    if (this.first) parts.push('first token ' + Math.round(this.first - started) + ' ms');
    const secs = (performance.now() - (this.first || started)) / 1000;
    if (n > 1 && secs > 0) parts.push(((n - 1) / secs).toFixed(1) + ' tok/s');
    if (usage?.prompt_tokens_details?.cached_tokens) parts.push(usage.prompt_tokens_details.cached_tokens + ' prompt tokens cached');
    parts.push(reason);
    this.meta.textContent = parts.join(' · ');
    const msg = { role: 'assistant', content: this.content };
    const calls = this.calls.filter(Boolean);
    if (calls.length) msg.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
    return msg;
  }

  error(message) {
    this.box.append(el('div', 'error', message));
  }
}

async function send(text) {
  history.push({ role: 'user', content: text });
  addMessage('user').append(el('div', 'content', text));
  const reply = new Reply();
  const body = { model, messages: [], stream: true, stream_options: { include_usage: true }, ...sampling() };
  // thinking sets the template's enable_thinking (the chat path's
  // chat_template_kwargs); empty leaves the template's default.
  const thinking = $('thinking').value;
  if (thinking) body.chat_template_kwargs = { enable_thinking: thinking === 'on' };
  const system = $('system').value.trim();
  if (system) body.messages.push({ role: 'system', content: system });
  body.messages.push(...history);
  running = new AbortController();
  setRunning(true);
  const started = performance.now();
  let reason = 'stopped';
  let usage = null;
  try {
    const t = tools();
    if (t) {
      body.tools = t;
      body.tool_choice = $('tool_choice').value;
    }
    const res = await api('/v1/chat/completions', { method: 'POST', body: JSON.stringify(body), signal: running.signal });
    if (!res.ok) {
      const e = await res.json().catch(() => ({}));
      throw new Error((e.error && e.error.message) || res.status + ' ' + res.statusText);
    }
    await sse(res, (ev) => {
      if (ev.error) throw new Error(ev.error.message);
      if (ev.usage) usage = ev.usage;
      for (const c of ev.choices || []) {
        if (c.delta) reply.delta(c.delta);
        if (c.finish_reason) reason = c.finish_reason;
      }
    });
  } catch (err) {
    if (err.name !== 'AbortError') reply.error(err.message);
  } finally {
    history.push(reply.finish(reason, usage, started));
    running = null;
    setRunning(false);
  }
}

function setRunning(on) {
  $('send').disabled = on;
  $('stop').disabled = !on;
  document.body.classList.toggle('generating', on);
}

export function initChat() {
  $('chat-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || running) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) {
      ev.preventDefault();
      $('chat-form').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => running && running.abort());
  $('clear').addEventListener('click', () => {
    if (running) running.abort();
    history.length = 0;
    $('messages').replaceChildren();
  });
}

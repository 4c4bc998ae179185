// Calls to this server's /v1 API. The API key, when the server wants one,
// is asked for once and kept in this module's memory only.

let apiKey = '';
let asking = null; // the pending key prompt, shared by concurrent calls

function askKey(message) {
  if (asking) return asking;
  const dialog = document.getElementById('key-dialog');
  const form = document.getElementById('key-form');
  const input = document.getElementById('key-input');
  document.getElementById('key-error').textContent = message || '';
  input.value = '';
  asking = new Promise((resolve) => {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      apiKey = input.value.trim();
      dialog.close();
      asking = null;
      resolve();
    }, { once: true });
  });
  dialog.showModal();
  input.focus();
  return asking;
}

// needKey asks for the key before the first call when /health says the
// server wants one, so that the page's first /v1 call is not refused.
export async function needKey() {
  const res = await fetch('/health');
  const h = await res.json().catch(() => ({}));
  if (h.api_key_required && !apiKey) await askKey('');
}

// api sends a request to path on this server with the key, asking for the
// key (again) while the answer is 401. It returns the Response.
export async function api(path, init = {}) {
  for (;;) {
    const headers = new Headers(init.headers || {});
    if (apiKey) headers.set('Authorization', 'Bearer ' + apiKey);
    if (init.body) headers.set('Content-Type', 'application/json');
    const res = await fetch(path, { ...init, headers });
    if (res.status !== 401) return res;
    await askKey(apiKey ? 'That key was refused.' : '');
  }
}

// json GETs path and decodes the answer, throwing the server's error
// message on a failure.
export async function json(path) {
  const res = await api(path);
  const body = await res.json();
  if (!res.ok) throw new Error((body.error && body.error.message) || res.statusText);
  return body;
}

// sse reads a text/event-stream Response, calling onEvent with each
// decoded data: payload until [DONE].
export async function sse(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (data === '[DONE]') return;
      if (data) onEvent(JSON.parse(data));
    }
  }
}

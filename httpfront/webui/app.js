// The ninfer web UI: chat, the graph the engine runs, live engine figures.
// Everything it loads or calls is on this server.
import { json, needKey } from './api.js';
import { initChat, setModel } from './chat.js';
import { showGraph } from './graph.js';
import { startFigures } from './figures.js';

async function modelInfo() {
  const info = document.getElementById('model-info');
  try {
    const models = await json('/v1/models');
    const m = models.data[0];
    const parts = [m.id, `context ${m.max_model_len}`];
    if (m.meta) parts.push(`trained ${m.meta.n_ctx_train}`, `vocab ${m.meta.n_vocab}`);
    info.textContent = parts.join(' · ');
    info.dataset.model = m.id;
    setModel(m.id);
  } catch (err) {
    info.textContent = 'model unavailable: ' + err.message;
    setTimeout(modelInfo, 2000); // e.g. still loading: try again
  }
}

function show(view) {
  for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.view === view);
  for (const v of document.querySelectorAll('.view')) v.classList.toggle('hidden', v.id !== 'view-' + view);
  if (view === 'graph') showGraph();
}

// The tabs; #graph in the address opens the graph view.
function initTabs() {
  for (const tab of document.querySelectorAll('.tab')) {
    tab.addEventListener('click', () => {
      history.replaceState(null, '', tab.dataset.view === 'graph' ? '#graph' : '#');
      show(tab.dataset.view);
    });
  }
}

initTabs();
initChat();
needKey().then(modelInfo).then(() => {
  if (location.hash === '#graph') show('graph');
  startFigures();
});

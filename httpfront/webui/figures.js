// Live engine figures: polls /v1/stats/live and /v1/stats/intervals and
// redraws the plots, every quarter second while this page generates and
// every second otherwise.
import { json } from './api.js';
import { lines, bars, stacked, fmt } from './plot.js';

const WINDOW_MS = 60000;
const colors = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#dc2626', '#0891b2'];
const samples = []; // {t, running, waiting, cache: {name: frac}, hitRate}
let last = null; // the previous LiveStats
let polls = 0;

const $ = (id) => document.getElementById(id);

function tokensPerSecond(intervals, now) {
  const decode = [], prefill = [];
  for (const iv of intervals) {
    const secs = iv.complete ? iv.seconds : Math.max((now - iv.start_unix_ms) / 1000, 0.25);
    const t = iv.complete ? iv.start_unix_ms + 1000 : now;
    decode.push([t, iv.decode_tokens / secs]);
    prefill.push([t, iv.prefill_tokens / secs]);
  }
  return { decode, prefill };
}

function draw(live, intervals) {
  const now = live.unix_ms;
  const t0 = now - WINDOW_MS;
  const tps = tokensPerSecond(intervals, now);
  lines($('plot-tps'), [
    { name: 'decode', color: colors[0], points: tps.decode },
    { name: 'prefill', color: colors[1], points: tps.prefill },
  ], { t0, t1: now });
  const cur = tps.decode.length && tps.decode[tps.decode.length - 1][0] >= now - 1500 ? tps.decode[tps.decode.length - 1][1] : 0;
  $('fig-tps').textContent = fmt(cur) + ' decode tok/s';

  lines($('plot-load'), [
    { name: 'running', color: colors[0], points: samples.map((s) => [s.t, s.running]) },
    { name: 'waiting', color: colors[1], points: samples.map((s) => [s.t, s.waiting]) },
  ], { t0, t1: now, ymax: Math.max(live.max_running, 1) });
  $('fig-load').textContent = `${live.running} running · ${live.waiting} waiting (of ${live.max_running})`;

  lines($('plot-cache'), live.cache_groups.map((g, i) => ({
    name: g.name, color: colors[i % colors.length], points: samples.map((s) => [s.t, 100 * (s.cache[g.name] || 0)]),
  })), { t0, t1: now, ymax: 100, unit: '%' });
  $('fig-cache').textContent = live.cache_groups.map((g) => `${g.name} ${g.used}/${g.total}` + (g.cached ? ` (+${g.cached} cached)` : '')).join(' · ');

  lines($('plot-prefix'), [{ name: 'hit rate', color: colors[2], points: samples.filter((s) => s.hitRate !== null).map((s) => [s.t, 100 * s.hitRate]) }],
    { t0, t1: now, ymax: 100, unit: '%' });
  $('fig-prefix').textContent = !live.prefix_cache ? 'prefix cache off'
    : live.prefix_queries ? `${(100 * live.prefix_hits / live.prefix_queries).toFixed(1)}% of ${live.prefix_queries} prompt tokens` : 'no prompt yet';

  const sp = live.speculative;
  bars($('plot-spec'), sp.accepted_per_position.map((n, i) => ({
    label: 'pos ' + i, value: sp.rounds ? 100 * n / sp.rounds : 0, title: `position ${i}: ${n} of ${sp.rounds} rounds accepted`,
  })), { ymax: 100, unit: '%' });
  $('fig-spec').textContent = sp.drafted ? `${(100 * sp.accepted / sp.drafted).toFixed(1)}% of ${sp.drafted} drafts` : 'no drafts yet';

  const recent = live.recent.slice(-8);
  const first = live.recent.length - recent.length;
  stacked($('plot-phases'), recent.map((r, i) => ({
    label: '#' + (first + i + 1),
    parts: [
      { name: 'queue', value: r.queue_ms, color: colors[4] },
      { name: 'prefill', value: r.prefill_ms, color: colors[1] },
      { name: 'decode', value: r.decode_ms, color: colors[0] },
    ],
  })), { legend: [{ name: 'queue', color: colors[4] }, { name: 'prefill', color: colors[1] }, { name: 'decode', color: colors[0] }] });
}

async function poll() {
  const since = Date.now() - WINDOW_MS;
  const [live, iv] = await Promise.all([json('/v1/stats/live'), json('/v1/stats/intervals?since_unix_ms=' + since)]);
  let hitRate = null;
  if (last && live.prefix_queries > last.prefix_queries) {
    hitRate = (live.prefix_hits - last.prefix_hits) / (live.prefix_queries - last.prefix_queries);
  }
  const cache = {};
  for (const g of live.cache_groups) cache[g.name] = g.total ? g.used / g.total : 0;
  samples.push({ t: live.unix_ms, running: live.running, waiting: live.waiting, cache, hitRate });
  while (samples.length && samples[0].t < live.unix_ms - WINDOW_MS) samples.shift();
  last = live;
  draw(live, iv.intervals);
  document.getElementById('figures').dataset.polls = String(++polls);
  document.dispatchEvent(new CustomEvent('ninfer-live', { detail: live }));
}

export function startFigures() {
  const tick = async () => {
    try {
      await poll();
    } catch (err) {
      $('fig-tps').textContent = 'unavailable: ' + err.message;
    }
    setTimeout(tick, document.body.classList.contains('generating') ? 250 : 1000);
  };
  tick();
}

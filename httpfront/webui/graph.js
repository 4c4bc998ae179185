// The graph view: draws the compiled plan the engine runs (GET /v1/graph)
// as SVG. Steps are laid out in layers by their inputs, top to bottom;
// a loop is a box around its body, with its feedback edges (next) drawn
// dashed; carried values ($prev.NAME) are dashed edges from the step that
// produces them; the cache groups sit on the right, joined to the device
// steps that use them, their fill following the live figures.
import { json } from './api.js';
import { svg } from './plot.js';

const STEP_H = 44, IO_H = 26, GAP_X = 26, GAP_Y = 34, PAD = 14, TITLE = 22;
const textWidth = (s, px = 6.6) => s.length * px;

function splitRef(ref) {
  const i = ref.indexOf('.');
  return [ref.slice(0, i), ref.slice(i + 1)];
}

// layoutBlock places steps (and the inputs they read through prefix,
// "$in" or "$loop") in layers; a loop step becomes a box holding its
// body's own layout. Coordinates are relative to the block.
function layoutBlock(steps, scope, prefix, outs, extraInputs = []) {
  const items = [];
  const byKey = new Map();
  const inputs = new Set(extraInputs.map((k) => prefix + '.' + k));
  for (const st of steps) for (const ref of Object.values(st.in)) if (ref.startsWith(prefix + '.')) inputs.add(ref);
  for (const ref of [...inputs].sort()) {
    const it = { kind: 'input', key: ref, label: ref, w: textWidth(ref) + 20, h: IO_H, layer: 0 };
    items.push(it);
    byKey.set(ref, it);
  }
  for (const st of steps) {
    let layer = st.placement === 'policy' ? 0 : 1;
    for (const ref of Object.values(st.in)) {
      const src = byKey.get(splitRef(ref)[0]) || byKey.get(ref);
      if (src) layer = Math.max(layer, src.layer + 1);
    }
    let it;
    if (st.loop) {
      const inner = layoutBlock(st.loop.steps, scope + '/' + st.id, '$loop', null, Object.keys(st.loop.next));
      const title = loopTitle(st);
      it = { kind: 'loop', step: st, inner, w: Math.max(inner.w + 2 * PAD, textWidth(title) + 30), h: inner.h + TITLE + 2 * PAD, title };
    } else {
      it = { kind: 'step', step: st, w: Math.max(150, textWidth(st.id, 7.4) + 50, textWidth(st.op) + 20), h: STEP_H };
    }
    it.key = st.id;
    it.layer = layer;
    items.push(it);
    byKey.set(st.id, it);
  }
  for (const [name, ref] of Object.entries(outs || {})) {
    const src = byKey.get(splitRef(ref)[0]);
    const it = { kind: 'output', key: 'out.' + name, label: 'out.' + name, ref, w: textWidth('out.' + name) + 20, h: IO_H, layer: (src ? src.layer : 0) + 1 };
    items.push(it);
    byKey.set(it.key, it);
  }
  const rows = [];
  for (const it of items) (rows[it.layer] ||= []).push(it);
  const live = rows.filter(Boolean);
  const widths = live.map((r) => r.reduce((a, it) => a + it.w, 0) + GAP_X * (r.length - 1));
  const w = Math.max(...widths, 100);
  let y = 0;
  live.forEach((r, i) => {
    let x = (w - widths[i]) / 2;
    const rh = Math.max(...r.map((it) => it.h));
    for (const it of r) {
      it.x = x;
      it.y = y + (rh - it.h) / 2;
      x += it.w + GAP_X;
    }
    y += rh + GAP_Y;
  });
  return { items, byKey, w, h: y - GAP_Y, scope };
}

function loopTitle(st) {
  const l = st.loop;
  let t = `loop ${st.id}: ${l.block ? 'block of ' + l.repeat : '×' + l.repeat}`;
  if (l.model) t += ` · model ${l.model}`;
  if (l.ahead) t += ' · ahead';
  return t;
}

function paramsText(st) {
  const ps = Object.entries(st.params).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} = ${v}`);
  const ins = Object.entries(st.in).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `in ${k} <- ${v}`);
  return [`${st.id}: ${st.op} [${st.placement}]` + (st.model ? ` model ${st.model}` : ''), ...ins, ...ps].join('\n');
}

// Drawing: absolute boxes by scope-qualified key, for the edges.
class Drawing {
  constructor(doc) {
    this.doc = doc;
    this.boxes = new Map(); // scope/key -> {x, y, w, h}
    this.loops = svg('g', { class: 'loops' }); // under the edges: a loop's body wires run on its box
    this.edges = svg('g', { class: 'edges' });
    this.nodes = svg('g', { class: 'nodes' });
    this.segOf = new Map(); // scope/id -> segment index
  }

  place(block, ox, oy, segments, parentScope) {
    segments.forEach((seg, i) => seg.steps.forEach((id) => this.segOf.set(block.scope + '/' + id, i)));
    for (const it of block.items) {
      const box = { x: ox + it.x, y: oy + it.y, w: it.w, h: it.h, layer: it.kind === 'loop' || it.kind === 'step' || it.kind === 'output' ? it.layer : 0, scope: block.scope, inputs: 0, used: 0 };
      this.boxes.set(block.scope + '/' + it.key, box);
      if (it.kind === 'loop') {
        const g = svg('g', { class: 'loop', 'data-step': it.step.id, 'data-op': 'loop' });
        g.append(svg('title', {}, paramsText(it.step)));
        g.append(svg('rect', { x: box.x, y: box.y, width: box.w, height: box.h, rx: 10, class: 'loop-box' }));
        g.append(svg('text', { x: box.x + 10, y: box.y + 16, class: 'loop-title' }, it.title));
        this.loops.append(g);
        this.place(it.inner, box.x + (box.w - it.inner.w) / 2, box.y + TITLE + PAD, it.step.loop.segments, block.scope);
      } else if (it.kind === 'step') {
        this.drawStep(it.step, box, block.scope);
      } else {
        const g = svg('g', { class: 'io ' + it.kind, 'data-ref': it.key });
        g.append(svg('rect', { x: box.x, y: box.y, width: box.w, height: box.h, rx: 13 }));
        g.append(svg('text', { x: box.x + box.w / 2, y: box.y + 17, 'text-anchor': 'middle' }, it.label));
        this.nodes.append(g);
      }
    }
    for (const it of block.items) {
      const box = this.boxes.get(block.scope + '/' + it.key);
      if (it.step) box.inputs = Object.values(it.step.in).filter((r) => !r.startsWith('$prev.')).length;
      if (it.kind === 'output') box.inputs = 1;
    }
    for (const it of block.items) {
      const st = it.step;
      if (!st) continue;
      for (const [port, ref] of Object.entries(st.in)) this.edge(block.scope, parentScope, ref, it.key, port);
      if (it.kind === 'loop') {
        const inner = it.inner.scope;
        for (const [k, ref] of Object.entries(st.loop.next)) this.feedback(inner, ref, '$loop.' + k, 'next ' + k);
        for (const [k, ref] of Object.entries(st.loop.out)) {
          const from = this.boxes.get(inner + '/' + splitRef(ref)[0]);
          const to = this.boxes.get(block.scope + '/' + it.key);
          if (from && to) this.curve(from, { x: from.x, y: to.y + to.h - 2, w: from.w, h: 0, inputs: 1, used: 0 }, 'flow', 'out ' + k);
        }
      }
    }
    for (const it of block.items) {
      if (it.kind !== 'output') continue;
      this.edge(block.scope, parentScope, it.ref, it.key, '');
    }
  }

  drawStep(st, box, scope) {
    const g = svg('g', { class: 'node ' + st.placement, 'data-step': st.id, 'data-op': st.op });
    g.append(svg('title', {}, paramsText(st)));
    g.append(svg('rect', { x: box.x, y: box.y, width: box.w, height: box.h, rx: 6 }));
    g.append(svg('text', { x: box.x + 8, y: box.y + 18, class: 'step-id' }, st.id));
    g.append(svg('text', { x: box.x + 8, y: box.y + 35, class: 'step-op' }, st.op));
    const seg = this.segOf.get(scope + '/' + st.id);
    const badge = st.placement === 'policy' ? 'policy' : (seg !== undefined ? `seg ${seg} · ` : '') + st.placement;
    g.append(svg('text', { x: box.x + box.w - 6, y: box.y + 14, class: 'badge', 'text-anchor': 'end' }, badge));
    this.nodes.append(g);
  }

  // edge draws the wire from ref (in scope, else its parent's) into the
  // item key of scope, labelled with the input port.
  edge(scope, parentScope, ref, key, port) {
    const to = this.boxes.get(scope + '/' + key);
    const [node, p] = splitRef(ref);
    if (node === '$prev') {
      const src = this.doc.plan.carry[p];
      const from = src && this.boxes.get('/' + splitRef(src)[0]);
      if (from && to) this.back(from, to, 'carry', `${ref} (carried: ${src})`);
      return;
    }
    let from = this.boxes.get(scope + '/' + node) || this.boxes.get(scope + '/' + ref);
    if (!from && parentScope !== undefined) from = this.boxes.get(parentScope + '/' + node);
    if (from && to) this.curve(from, to, 'flow', port);
  }

  feedback(scope, ref, inputKey, label) {
    const from = this.boxes.get(scope + '/' + splitRef(ref)[0]);
    const to = this.boxes.get(scope + '/' + inputKey);
    if (from && to) this.back(from, to, 'next', label);
  }

  // curve draws a wire from a's bottom into b's top, at the next of b's
  // input slots; a wire that would cross the boxes of the layers between
  // goes around them on the left.
  curve(a, b, cls, label) {
    const x1 = a.x + a.w / 2, y1 = a.y + a.h;
    const slot = b.used++;
    const x2 = b.x + (b.w * (slot + 1)) / (Math.max(b.inputs, slot + 1) + 1), y2 = b.y;
    const between = [...this.boxes.values()].filter((c) => c.scope === a.scope && c.scope === b.scope &&
      c.layer > a.layer && c.layer < b.layer && c.x < Math.max(x1, x2) + 8 && c.x + c.w > Math.min(x1, x2) - 8);
    let d;
    if (between.length && b.layer - a.layer > 1) {
      const lane = Math.min(...between.map((c) => c.x)) - 12 - 7 * (this.lanes = (this.lanes || 0) + 1);
      const top = Math.min(...between.map((c) => c.y)) - 8, bottom = Math.max(...between.map((c) => c.y + c.h)) + 8;
      d = `M${x1},${y1} C${x1},${top} ${lane},${y1} ${lane},${top} L${lane},${bottom} C${lane},${y2} ${x2},${bottom} ${x2},${y2}`;
    } else {
      const dy = Math.max((y2 - y1) / 2, 12);
      d = `M${x1},${y1} C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}`;
    }
    this.edges.append(svg('path', { d, class: 'edge ' + cls, 'marker-end': 'url(#arrow)' }));
    if (label) this.edges.append(svg('text', { x: x2 + 3, y: y2 - 4 - 9 * (slot % 2), class: 'edge-label' }, label));
  }

  // back draws an edge against the flow (a loop's feedback, a carried
  // value), around the right side of both boxes.
  back(a, b, cls, label) {
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x + b.w, y2 = b.y + b.h / 2;
    const bulge = Math.max(x1, x2) + 40;
    this.edges.append(svg('path', { d: `M${x1},${y1} C${bulge},${y1} ${bulge},${y2} ${x2},${y2}`, class: 'edge ' + cls, 'marker-end': 'url(#arrow-' + cls + ')' }));
    this.edges.append(svg('text', { x: bulge - 16, y: (y1 + y2) / 2, class: 'edge-label ' + cls }, label));
  }
}

function marker(id, cls) {
  const m = svg('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  m.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow ' + cls }));
  return m;
}

// allSteps lists the plan's steps and its loops' body steps.
function allSteps(steps, out = []) {
  for (const st of steps) {
    out.push(st);
    if (st.loop) allSteps(st.loop.steps, out);
  }
  return out;
}

function drawCaches(d, groups, x0) {
  const g = svg('g', { class: 'caches' });
  const boxes = [];
  groups.forEach((c, i) => {
    const box = { x: x0, y: 10 + i * 84, w: 320, h: 66 };
    boxes.push(box);
    const cg = svg('g', { class: 'cache', 'data-cache': c.name });
    cg.append(svg('rect', { x: box.x, y: box.y, width: box.w, height: box.h, rx: 6, class: 'cache-box' }));
    cg.append(svg('text', { x: box.x + 8, y: box.y + 17, class: 'step-id' }, `${c.name} (${c.kind === 'kv' ? 'paged KV' : 'recurrent state'})`));
    const unit = c.kind === 'kv' ? `${c.total} blocks × ${c.block_tokens} tokens` : `${c.total} slots`;
    cg.append(svg('text', { x: box.x + 8, y: box.y + 33, class: 'step-op' }, `model ${c.model} · ${unit}${c.dtype ? ' · ' + c.dtype : ''}`));
    cg.append(svg('rect', { x: box.x + 8, y: box.y + 42, width: box.w - 16, height: 12, class: 'usage-track' }));
    cg.append(svg('rect', { x: box.x + 8, y: box.y + 42, width: 0, height: 12, class: 'usage-fill' }));
    cg.append(svg('text', { x: box.x + box.w - 10, y: box.y + 52, class: 'usage-text', 'text-anchor': 'end' }, ''));
    g.append(cg);
    for (const st of allSteps(d.doc.plan.steps)) {
      if (st.placement !== 'device' || st.model !== c.model) continue;
      for (const [key, b] of d.boxes) {
        if (!key.endsWith('/' + st.id)) continue;
        d.edges.append(svg('path', { d: `M${b.x + b.w},${b.y + b.h / 2} L${box.x},${box.y + box.h / 2}`, class: 'edge cache-link' }));
      }
    }
  });
  updateCaches(g, groups);
  return { g, h: groups.length * 84 + 10 };
}

function updateCaches(root, groups) {
  for (const c of groups) {
    const cg = root.querySelector(`g.cache[data-cache="${CSS.escape(c.name)}"]`);
    if (!cg) continue;
    const track = cg.querySelector('.usage-track');
    const frac = c.total ? c.used / c.total : 0;
    cg.querySelector('.usage-fill').setAttribute('width', (frac * track.width.baseVal.value).toFixed(1));
    cg.querySelector('.usage-text').textContent = `${c.used}/${c.total} used` + (c.cached ? ` · ${c.cached} cached` : '');
  }
}

let drawn = null;

export async function showGraph() {
  const box = document.getElementById('graph');
  let doc;
  try {
    doc = await json('/v1/graph');
  } catch (err) {
    box.textContent = 'The plan is unavailable: ' + err.message;
    return;
  }
  const p = doc.plan;
  document.getElementById('plan-title').textContent =
    `plan ${p.name} (${p.file}) · prefill chunk ${p.policy.prefill_chunk} · KV ${p.policy.kv_dtype}, ${p.policy.kv_block_tokens} tokens per block · ${p.hash.slice(0, 12)}`;
  const block = layoutBlock(p.steps, '', '$in', p.out);
  const d = new Drawing(doc);
  d.place(block, 60, 20, p.segments);
  const cacheX = 60 + block.w + 110;
  const caches = drawCaches(d, doc.cache_groups, cacheX);
  const width = cacheX + 340, height = Math.max(block.h + 60, caches.h + 20);
  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'plan', 'data-plan': p.name });
  const defs = svg('defs');
  defs.append(marker('arrow', 'flow'), marker('arrow-carry', 'carry'), marker('arrow-next', 'next'));
  root.append(defs, d.loops, d.edges, d.nodes, caches.g);
  box.replaceChildren(root);
  drawn = root;
}

document.addEventListener('ninfer-live', (ev) => {
  if (drawn) updateCaches(drawn, ev.detail.cache_groups);
});

// Small SVG plots: time-series lines, bars and stacked bars. Each call
// redraws its container from the data given.

const NS = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function frame(box, height) {
  const width = Math.max(box.clientWidth || 300, 200);
  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'chart' });
  box.replaceChildren(root);
  return { root, width, height };
}

export function fmt(v) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(0) + 'k';
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

// lines plots series [{name, color, points: [[t, y]...]}] over the time
// window [t0, t1] (ms); ymax fixes the top (else the data's max).
export function lines(box, series, { t0, t1, ymax, height = 90, unit = '' } = {}) {
  const { root, width } = frame(box, height);
  const left = 34, right = 6, top = 6, bottom = 14;
  const w = width - left - right, h = height - top - bottom;
  let top_ = ymax;
  if (top_ === undefined) {
    top_ = 0;
    for (const s of series) for (const [, y] of s.points) top_ = Math.max(top_, y);
    top_ = top_ > 0 ? top_ * 1.1 : 1;
  }
  const x = (t) => left + ((t - t0) / Math.max(t1 - t0, 1)) * w;
  const y = (v) => top + h - (Math.min(v, top_) / top_) * h;
  for (const f of [0, 0.5, 1]) {
    root.append(svg('line', { x1: left, x2: left + w, y1: y(top_ * f), y2: y(top_ * f), class: 'gridline' }));
    root.append(svg('text', { x: left - 3, y: y(top_ * f) + 3, class: 'tick', 'text-anchor': 'end' }, fmt(top_ * f) + unit));
  }
  root.append(svg('text', { x: left, y: height - 2, class: 'tick' }, `-${Math.round((t1 - t0) / 1000)} s`));
  root.append(svg('text', { x: left + w, y: height - 2, class: 'tick', 'text-anchor': 'end' }, 'now'));
  let lx = left + 4;
  for (const s of series) {
    const pts = s.points.filter(([t]) => t >= t0).map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    if (pts.length) root.append(svg('polyline', { points: pts.join(' '), fill: 'none', stroke: s.color, 'stroke-width': 1.6, class: 'series', 'data-series': s.name }));
    if (series.length > 1) {
      const label = svg('text', { x: lx, y: top + 9, class: 'key', fill: s.color }, s.name);
      root.append(label);
      lx += 8 + 6.5 * s.name.length;
    }
  }
  return root;
}

// bars plots [{label, value, title}] as vertical bars; ymax fixes the top.
export function bars(box, items, { ymax, height = 90, color = '#7c3aed', unit = '' } = {}) {
  const { root, width } = frame(box, height);
  if (!items.length) {
    root.append(svg('text', { x: width / 2, y: height / 2, class: 'empty', 'text-anchor': 'middle' }, 'no data yet'));
    return root;
  }
  const left = 34, bottom = 14, top = 6;
  const h = height - top - bottom;
  const top_ = ymax ?? Math.max(...items.map((i) => i.value), 1e-9);
  const slot = (width - left - 4) / items.length;
  root.append(svg('text', { x: left - 3, y: top + 3, class: 'tick', 'text-anchor': 'end' }, fmt(top_) + unit));
  root.append(svg('line', { x1: left, x2: width - 4, y1: top + h, y2: top + h, class: 'gridline' }));
  items.forEach((it, i) => {
    const bh = (Math.min(it.value, top_) / top_) * h;
    const r = svg('rect', { x: left + i * slot + slot * 0.15, y: top + h - bh, width: slot * 0.7, height: Math.max(bh, 0.5), fill: color, class: 'bar' });
    r.append(svg('title', {}, it.title || `${it.label}: ${fmt(it.value)}${unit}`));
    root.append(r);
    root.append(svg('text', { x: left + i * slot + slot / 2, y: height - 2, class: 'tick', 'text-anchor': 'middle' }, it.label));
  });
  return root;
}

// stacked plots rows [{label, parts: [{name, value, color}]}] as
// horizontal stacked bars on one scale.
export function stacked(box, rows, { height, legend = [] } = {}) {
  const rowH = 13;
  const { root, width } = frame(box, height ?? Math.max(40, 18 + rows.length * rowH));
  if (!rows.length) {
    root.append(svg('text', { x: width / 2, y: 24, class: 'empty', 'text-anchor': 'middle' }, 'no finished request yet'));
    return root;
  }
  const left = 34, top = 14, w = width - left - 40;
  const max = Math.max(...rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0)), 1e-9);
  let lx = left;
  for (const l of legend) {
    root.append(svg('rect', { x: lx, y: 2, width: 8, height: 8, fill: l.color }));
    root.append(svg('text', { x: lx + 11, y: 10, class: 'key' }, l.name));
    lx += 20 + 6.5 * l.name.length;
  }
  rows.forEach((r, i) => {
    const y = top + i * rowH;
    root.append(svg('text', { x: left - 3, y: y + 9, class: 'tick', 'text-anchor': 'end' }, r.label));
    let x = left;
    let total = 0;
    for (const p of r.parts) {
      const pw = (p.value / max) * w;
      const rect = svg('rect', { x, y, width: Math.max(pw, 0), height: rowH - 3, fill: p.color, class: 'bar' });
      rect.append(svg('title', {}, `${p.name}: ${fmt(p.value)} ms`));
      root.append(rect);
      x += pw;
      total += p.value;
    }
    root.append(svg('text', { x: x + 3, y: y + 9, class: 'tick' }, fmt(total)));
  });
  return root;
}

// @ts-check
// The lateness chart: one line per queue over the asked window, drawn as SVG
// by hand (no chart library, nothing to build). A line breaks where a queue
// started no job for a while, so an idle stretch is not drawn as a slope.

/**
 * @typedef {{ t: number, count: number, meanMs: number, maxMs: number, p50Ms: number, p95Ms: number, p99Ms: number }} Point
 * @typedef {{ queue: string, points: Point[] }} Series
 * @typedef {'meanMs' | 'maxMs' | 'p50Ms' | 'p95Ms' | 'p99Ms'} Stat
 */

const SVG = 'http://www.w3.org/2000/svg';
const W = 760;
const H = 240;
const PAD = { left: 56, right: 12, top: 12, bottom: 28 };
const GAP_MS = 3_000;
export const COLOURS = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2'];

/**
 * @param {string} name
 * @param {Record<string, string | number>} attrs
 * @param {string} [text]
 */
function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A round axis top above `max`: 1, 2 or 5 times a power of ten. @param {number} max */
function niceTop(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= max) ?? 10 * p;
}

/** @param {number} ms */
export function formatMs(ms) {
  if (ms === 0) return '0';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/**
 * @param {SVGSVGElement} svg
 * @param {{ from: number, to: number, queues: Series[], stat: Stat }} data
 */
export function drawLateness(svg, data) {
  const { from, to, queues, stat } = data;
  svg.replaceChildren();
  const top = niceTop(Math.max(0, ...queues.flatMap((q) => q.points.map((p) => p[stat]))));
  const x = (/** @type {number} */ t) => PAD.left + ((t - from) / Math.max(1, to - from)) * (W - PAD.left - PAD.right);
  const y = (/** @type {number} */ v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);

  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.append(el('line', { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(el('text', { x: PAD.left - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, formatMs(v)));
  }
  const minutes = Math.round((to - from) / 60_000);
  for (let m = 0; m <= minutes; m++) {
    const t = to - m * 60_000;
    svg.append(el('text', { x: x(t), y: H - 8, class: 'axis', 'text-anchor': 'middle' }, m === 0 ? 'now' : `-${m} min`));
  }

  queues.forEach((q, i) => {
    const colour = COLOURS[i % COLOURS.length] ?? '#000';
    /** @type {string[]} */
    const segments = [];
    let last = -Infinity;
    for (const p of q.points) {
      segments.push(`${p.t - last > GAP_MS ? 'M' : 'L'}${x(p.t).toFixed(1)},${y(p[stat]).toFixed(1)}`);
      last = p.t;
    }
    if (segments.length === 0) return;
    svg.append(el('path', { d: segments.join(' '), stroke: colour, class: 'series', 'data-queue': q.queue }));
    // A lone second has no line to show: a dot marks it.
    for (const p of q.points) svg.append(el('circle', { cx: x(p.t), cy: y(p[stat]), r: 1.8, fill: colour }));
  });
}

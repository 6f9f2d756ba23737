// A line chart drawn as SVG: no library, so nothing to fetch or vendor.

import { h } from './dom.js';
import { timeZone } from './format.js';

const NS = 'http://www.w3.org/2000/svg';
const PAD = { left: 64, right: 12, top: 14, bottom: 26 };
const DAY_MS = 86400000;
// Room between two labels of the time axis, in px.
const LABEL_GAP = 16;
const dateParts = new Intl.DateTimeFormat('en-US', { timeZone, month: 'numeric', day: 'numeric' });
// Which days of the time axis get a label, finest first: the first that
// leaves room between its labels is used.
const DAY_LEVELS = [
  () => true,
  (d) => d.index % 2 === 0,
  (d) => d.index % 7 === 0,
  (d) => d.index % 14 === 0,
  (d) => d.day === 1,
  (d) => d.day === 1 && d.month % 2 === 1,
  (d) => d.day === 1 && d.month % 3 === 1,
  (d) => d.day === 1 && d.month % 6 === 1,
  (d) => d.day === 1 && d.month === 1,
];

function el(name, attributes, text) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

// A step path through `points`: a value holds until the next one, the
// last until `right`.
function steps(points, x, y, right) {
  let d = `M${x(points[0].t).toFixed(1)},${y(points[0].v).toFixed(1)}`;
  for (let i = 1; i < points.length; i++) {
    d += `H${x(points[i].t).toFixed(1)}V${y(points[i].v).toFixed(1)}`;
  }
  return `${d}H${right.toFixed(1)}`;
}

// Round values for the value axis between `low` and `high` (1, 2, 2.5 or 5
// times a power of ten apart), about `count` of them, and the decimals
// that write them.
function valueTicks(low, high, count) {
  const rough = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const multiple = [1, 2, 2.5, 5, 10].find((m) => m * power >= rough);
  const step = multiple * power;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (multiple === 2.5 ? 1 : 0));
  const ticks = [];
  for (let i = Math.ceil(low / step); i * step <= high; i++) ticks.push(i * step);
  return { ticks, format: new Intl.NumberFormat(undefined, { minimumFractionDigits: decimals, maximumFractionDigits: decimals }) };
}

// The start of each day from `start` to `end` (ms) in the service's zone,
// counted in whole days from `dayStart`, a day's start (exact in zones
// without summer time, such as Addis Ababa's; an hour off at most in the
// others), with its month and day of the month.
function days(dayStart, start, end) {
  const out = [];
  for (let t = dayStart + Math.ceil((start - dayStart) / DAY_MS) * DAY_MS; t <= end; t += DAY_MS) {
    const parts = Object.fromEntries(dateParts.formatToParts(new Date(t + DAY_MS / 2)).map((p) => [p.type, p.value]));
    out.push({ t, month: Number(parts.month), day: Number(parts.day), index: out.length });
  }
  return out;
}

// The entries of `reference` in force from `start` to `end`: the one in
// force at `start` is moved to it, those after `end` left out.
function inForce(reference, start, end) {
  return reference
    .filter((p, i) => p.t.getTime() <= end && (i + 1 === reference.length || reference[i + 1].t.getTime() > start))
    .map((p) => ({ t: new Date(Math.max(p.t.getTime(), start)), v: p.v }));
}

function drawLegend(legend, labels, shown) {
  legend.hidden = !shown;
  legend.replaceChildren(...(shown ? [
    h('li', {}, h('span', { class: 'swatch line', 'aria-hidden': 'true' }), labels.line),
    h('li', {}, h('span', { class: 'swatch reference', 'aria-hidden': 'true' }), labels.reference),
  ] : []));
}

// Draws `series` ([{t: Date, v: number}], oldest first) into `svg`, sized
// to the element as it is laid out now, and `reference` (the same shape,
// possibly empty, possibly from before `from`) dashed beside it. The time
// axis runs from the first day either line knows (not before `from`, a
// day's start) to `to`, each value holding until the next, and dates days
// as `formatTime` writes them; `legend` (a list beside the chart, so it
// never covers a line) names the two lines when both show.
// The chart notes the points it drew and the width it was drawn at.
export function drawChart(svg, series, {
  formatTime, empty, reference = [], labels, legend, from, to = new Date(),
}) {
  svg.replaceChildren();
  const width = Math.max(svg.clientWidth, 200);
  const height = Math.max(svg.clientHeight, 120);
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.dataset.width = String(svg.clientWidth);
  if (series.length === 0) {
    svg.dataset.points = '0';
    svg.dataset.referencePoints = '0';
    drawLegend(legend, labels, false);
    svg.append(el('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle' }, empty));
    return;
  }
  const end = Math.max(to.getTime(), series[series.length - 1].t.getTime());
  const known = Math.min(series[0].t.getTime(), reference[0]?.t.getTime() ?? Infinity);
  const start = Math.max(from?.getTime() ?? known, known);
  const points = inForce(series, start, end);
  const held = inForce(reference, start, end);
  svg.dataset.points = String(points.length);
  svg.dataset.referencePoints = String(held.length);
  drawLegend(legend, labels, held.length > 0);

  const values = [...points, ...held].map((p) => p.v);
  let low = Math.min(...values);
  let high = Math.max(...values);
  if (low === high) { low -= 1; high += 1; }
  const margin = (high - low) * 0.08;
  low -= margin;
  high += margin;
  const span = Math.max(end - start, 1);
  const plotWidth = width - PAD.left - PAD.right;
  const x = (t) => PAD.left + ((t.getTime() - start) / span) * plotWidth;
  const y = (v) => PAD.top + (1 - (v - low) / (high - low)) * (height - PAD.top - PAD.bottom);

  const axis = valueTicks(low, high, 5);
  for (const v of axis.ticks) {
    const gy = y(v);
    svg.append(el('line', { class: 'grid', x1: PAD.left, x2: width - PAD.right, y1: gy, y2: gy }));
    svg.append(el('text', { x: PAD.left - 6, y: gy + 4, 'text-anchor': 'end' }, axis.format.format(v)));
  }

  // Days at the starts of which a date is written, centred, as many as
  // fit side by side (measured on the widest date); a date that would
  // reach past the frame is left out.
  const label = (d) => formatTime(new Date(d.t + DAY_MS / 2));
  const all = days((from ?? series[0].t).getTime(), start, end);
  const probe = el('text', {}, '');
  svg.append(probe);
  let labelWidth = 0;
  for (const d of [...all.slice(0, 31), all[all.length - 1]].filter(Boolean)) {
    probe.textContent = label(d);
    labelWidth = Math.max(labelWidth, probe.getComputedTextLength());
  }
  probe.remove();
  const room = ((labelWidth + LABEL_GAP) / plotWidth) * span;
  const spaced = (ticks) => ticks.every((d, i) => i === 0 || d.t - ticks[i - 1].t >= room);
  const dated = DAY_LEVELS.map((level) => all.filter(level)).find(spaced) ?? [];
  for (const d of dated) {
    const tx = x(new Date(d.t));
    if (tx - labelWidth / 2 < 0 || tx + labelWidth / 2 > width) continue;
    svg.append(el('line', { class: 'grid', x1: tx, x2: tx, y1: PAD.top, y2: height - PAD.bottom }));
    svg.append(el('text', { x: tx, y: height - 6, 'text-anchor': 'middle' }, label(d)));
  }

  const right = PAD.left + plotWidth;
  if (held.length) {
    svg.append(el('path', { class: 'reference', d: steps(held, x, y, right) }));
  }
  svg.append(el('path', { class: 'line', d: steps(points, x, y, right) }));
}

// A line chart drawn as SVG: no library, so nothing to fetch or vendor.

const NS = 'http://www.w3.org/2000/svg';

function el(name, attributes, text) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

// A step path through `points`: a value holds until the next one.
function steps(points, x, y, right) {
  let d = `M${x(points[0].t).toFixed(1)},${y(points[0].v).toFixed(1)}`;
  for (let i = 1; i < points.length; i++) {
    d += `H${x(points[i].t).toFixed(1)}V${y(points[i].v).toFixed(1)}`;
  }
  return d + `H${right}`;
}

// Draws `points` ([{t: Date, v: number}], oldest first) into `svg`, sized
// to the element as it is laid out now, and `reference` (the same shape,
// possibly empty) dashed beside it; `format` gives the axis labels.
export function drawChart(svg, points, { formatValue, formatTime, empty, reference = [], labels }) {
  svg.replaceChildren();
  const width = Math.max(svg.clientWidth, 200);
  const height = Math.max(svg.clientHeight, 120);
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.dataset.points = String(points.length);
  svg.dataset.referencePoints = String(reference.length);
  if (points.length === 0) {
    svg.append(el('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle' }, empty));
    return;
  }
  const pad = { left: 64, right: 12, top: 12, bottom: 26 };
  // The reference line is drawn over the bank's days only.
  const first = points[0].t.getTime();
  const last = points[points.length - 1].t.getTime();
  const held = reference.filter((p, i) => p.t.getTime() <= last
    && (i + 1 === reference.length || reference[i + 1].t.getTime() > first))
    .map((p) => ({ t: new Date(Math.max(p.t.getTime(), first)), v: p.v }));
  const values = [...points, ...held].map((p) => p.v);
  let low = Math.min(...values);
  let high = Math.max(...values);
  if (low === high) { low -= 1; high += 1; }
  const margin = (high - low) * 0.08;
  low -= margin;
  high += margin;
  const t0 = points[0].t.getTime();
  const t1 = points[points.length - 1].t.getTime();
  const span = Math.max(t1 - t0, 1);
  const x = (t) => pad.left + ((t.getTime() - t0) / span) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - (v - low) / (high - low)) * (height - pad.top - pad.bottom);

  for (let i = 0; i <= 3; i++) {
    const v = low + ((high - low) * i) / 3;
    const gy = y(v);
    svg.append(el('line', { class: 'grid', x1: pad.left, x2: width - pad.right, y1: gy, y2: gy }));
    svg.append(el('text', { x: pad.left - 6, y: gy + 4, 'text-anchor': 'end' }, formatValue(v)));
  }
  svg.append(el('text', { x: pad.left, y: height - 6 }, formatTime(points[0].t)));
  svg.append(el('text', { x: width - pad.right, y: height - 6, 'text-anchor': 'end' },
    formatTime(points[points.length - 1].t)));

  const right = points.length === 1 ? width - pad.right : x(points[points.length - 1].t);
  if (held.length) {
    svg.append(el('path', { class: 'reference', d: steps(held, x, y, right.toFixed(1)) }));
  }
  svg.append(el('path', { class: 'line', d: steps(points, x, y, right.toFixed(1)) }));
  if (held.length && labels) {
    const ly = pad.top + 4;
    svg.append(el('line', { class: 'legend-line', x1: pad.left + 8, x2: pad.left + 28, y1: ly, y2: ly }));
    svg.append(el('text', { x: pad.left + 32, y: ly + 4 }, labels.line));
    svg.append(el('line', { class: 'legend-reference', x1: pad.left + 150, x2: pad.left + 170, y1: ly, y2: ly }));
    svg.append(el('text', { x: pad.left + 174, y: ly + 4 }, labels.reference));
  }
}

// A line chart drawn as SVG: no library, so nothing to fetch or vendor.

const NS = 'http://www.w3.org/2000/svg';

function el(name, attributes, text) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

// Draws `points` ([{t: Date, v: number}], oldest first) into `svg`, sized
// to the element as it is laid out now; `format` gives the axis labels.
export function drawChart(svg, points, { formatValue, formatTime, empty }) {
  svg.replaceChildren();
  const width = Math.max(svg.clientWidth, 200);
  const height = Math.max(svg.clientHeight, 120);
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.dataset.points = String(points.length);
  if (points.length === 0) {
    svg.append(el('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle' }, empty));
    return;
  }
  const pad = { left: 64, right: 12, top: 12, bottom: 26 };
  const values = points.map((p) => p.v);
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

  // A step line: a value holds until the next one is published.
  let d = `M${x(points[0].t).toFixed(1)},${y(points[0].v).toFixed(1)}`;
  for (let i = 1; i < points.length; i++) {
    d += `H${x(points[i].t).toFixed(1)}V${y(points[i].v).toFixed(1)}`;
  }
  if (points.length === 1) d += `H${width - pad.right}`;
  svg.append(el('path', { class: 'line', d }));
}

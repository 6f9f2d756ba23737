// Building the page's elements.

export const $ = (selector) => document.querySelector(selector);

// An element with attributes and children. Children that are null,
// undefined or false are left out, so `cond && node` can be passed.
export function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) {
    if (v == null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k.startsWith('data-')) node.dataset[k.slice(5).replace(/-(\w)/g, (_, c) => c.toUpperCase())] = v;
    else node.setAttribute(k, v === true ? '' : v);
  }
  node.append(...children.filter((c) => c != null && c !== false));
  return node;
}

// Names each body cell of `table` by its column's heading (`data-label`),
// for the narrow layout that shows each row as a card (style.css, `.stack`).
// A heading only screen readers get names nothing.
export function labelCells(table) {
  const names = [...table.tHead.rows[0].cells]
    .map((th) => (th.querySelector('.visually-hidden') ? '' : th.textContent.trim()));
  for (const row of table.tBodies[0].rows) {
    [...row.cells].forEach((cell, i) => {
      if (names[i] && cell.colSpan === 1) cell.dataset.label = names[i];
    });
  }
}

// The bank table's "vs National Bank" view: each bank's spread and its
// premium over the National Bank's reference rate, from
// /api/v1/rates/spreads.

import { h } from './dom.js';
import { formatDay, formatPercent, formatRate, formatRecent } from './format.js';

export const SPREAD_KEYS = [
  'cashSpread', 'cashSpreadPercent', 'cashBuyingPremiumPercent', 'cashSellingPremiumPercent',
  'transactionalSpreadPercent',
];

export function parseSpreadSort(text) {
  const [k, dir] = (text || '').split('-');
  if (k === 'name' || k === 'updatedAt' || SPREAD_KEYS.includes(k)) {
    return { key: k, dir: dir === 'desc' ? 'desc' : 'asc' };
  }
  return { key: 'cashSpreadPercent', dir: 'asc' };
}

function sorted(banks, { key: k, dir }) {
  const sign = dir === 'asc' ? 1 : -1;
  const value = (r) => (k === 'name' ? r.bank.name : r[k]);
  return [...banks].sort((a, b) => {
    const va = value(a);
    const vb = value(b);
    if (va == null && vb == null) return a.bank.id - b.bank.id;
    if (va == null) return 1;
    if (vb == null) return -1;
    const c = typeof va === 'string' ? va.localeCompare(vb) : va - vb;
    return c !== 0 ? sign * c : a.bank.id - b.bank.id;
  });
}

const percentCell = (row, k) => h('td', { class: 'num', 'data-field': k, 'data-value': row[k] ?? '' },
  formatPercent(row[k], k.endsWith('PremiumPercent')));

// A spread percent cell, marked when the pair is over the spread cap.
const spreadCell = (row, k, overCap, cap) => {
  const cell = percentCell(row, k);
  if (overCap) {
    cell.classList.add('over-cap');
    cell.title = `Above the ${cap} % spread cap`;
  }
  return cell;
};

// The rows of `data` (the spreads answer's data, or null) sorted by `sort`.
export function spreadRows(data, sort, currency) {
  if (!data || data.banks.length === 0) {
    return [h('tr', {}, h('td', { colspan: 7, class: 'muted' }, `No bank quotes ${currency} now.`))];
  }
  return sorted(data.banks, sort).map((row) => h('tr', {
    'data-bank': row.bank.id,
    'data-reference-date': row.referenceDate ?? '',
    class: row.stale ? 'stale' : null,
  },
  h('th', { scope: 'row' }, row.bank.name),
  h('td', { class: 'num', 'data-field': 'cashSpread', 'data-value': row.cashSpread }, formatRate(row.cashSpread)),
  spreadCell(row, 'cashSpreadPercent', row.cashOverSpreadCap, data.spreadCapPercent),
  percentCell(row, 'cashBuyingPremiumPercent'),
  percentCell(row, 'cashSellingPremiumPercent'),
  spreadCell(row, 'transactionalSpreadPercent', row.transactionalOverSpreadCap, data.spreadCapPercent),
  h('td', {}, h('time', { datetime: row.updatedAt }, formatRecent(row.updatedAt)),
    row.stale && h('span', { class: 'stale-tag', title: 'Older than the service\'s freshness limit' }, 'stale'))));
}

// What the caption says of the reference in force, and of the spread cap.
export function referenceNote(data, currency) {
  const reference = data?.reference;
  const cap = data?.spreadCapPercent == null ? ''
    : ` Spreads above the ${data.spreadCapPercent} % cap are marked.`;
  if (!reference) {
    return `No National Bank reference rate for ${currency} yet: premiums are empty.${cap}`;
  }
  return `National Bank reference for ${currency} in force today (${formatDay(`${reference.date}T12:00:00+03:00`)}): `
    + `buying ${formatRate(reference.buying)}, selling ${formatRate(reference.selling)}, `
    + `weighted average ${formatRate(reference.weightedAverage)}. `
    + `Premiums compare each bank with the weighted average in force on the day of its board.${cap}`;
}

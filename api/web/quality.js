// Each active bank's quality over the last day (/api/v1/quality), worst
// first: its score, the publications its schedule expected and those it
// missed, outliers, corrections and retractions, and the pairs quoted over
// the National Bank's spread cap; as known at the instant shown, when one
// is. Read when the page's data is (a report is rendered from every board
// of the day, so it is not polled).

import { ApiError, get } from './api.js';
import { $, h, labelCells } from './dom.js';
import { formatPercent, formatTime } from './format.js';
import { withKnownAt } from './known.js';

const DAYS = 1;

const quality = { banks: new Map(), asked: 0 };

const bankName = (id) => quality.banks.get(id)?.name ?? `Bank ${id}`;

function published(r) {
  if (r.schedule == null) return h('span', { class: 'muted' }, 'no schedule');
  if (r.publishesExpected === 0) return h('span', { class: 'muted' }, 'none due yet');
  return `${r.publishesExpected - r.publishesMissed} of ${r.publishesExpected}, ${r.publishesMissed} missed`;
}

function schedule(s) {
  if (s == null) return '';
  return s.every ? `every ${s.every.replace(/^PT?/, '').toLowerCase()}` : `${s.days.join(' ')} by ${s.by}`;
}

function overCap(r) {
  const open = r.spreadCapBreaches.filter((b) => b.to == null);
  if (open.length === 0) {
    return r.spreadCapBreaches.length === 0 ? '–' : h('span', { class: 'muted' }, `${r.spreadCapBreaches.length} closed`);
  }
  const widest = Math.max(...open.map((b) => b.maxSpreadPercent));
  return h('span', { class: 'over-cap', title: `over the ${r.spreadCapPercent} % cap` },
    `${open.length} open, up to ${formatPercent(widest)}`);
}

function row(r) {
  const components = Object.entries(r.scoreComponents)
    .map(([name, c]) => `${name}: ${c.points} of ${c.weight}`).join(', ');
  return h('tr', { 'data-bank': r.bankId, 'data-score': r.score },
    h('td', { 'data-field': 'bank' }, bankName(r.bankId)),
    h('td', { class: 'num', 'data-field': 'score', title: components }, String(r.score)),
    h('td', { 'data-field': 'published', title: schedule(r.schedule) }, published(r)),
    h('td', { class: 'num', 'data-field': 'outliers' }, String(r.outliers)),
    h('td', { class: 'num', 'data-field': 'revisions' }, String(r.corrections + r.retractions)),
    h('td', { class: 'wrap', 'data-field': 'overCap' }, overCap(r)),
    h('td', { 'data-field': 'lastBoardAt' }, formatTime(r.lastBoardAt)));
}

function message(text) {
  return h('tr', {}, h('td', { colspan: 7, class: 'muted' }, text));
}

export async function loadQuality() {
  const asked = ++quality.asked;
  let reports;
  try {
    reports = (await get(withKnownAt(`/api/v1/quality?days=${DAYS}`))).data;
  } catch (e) {
    if (asked !== quality.asked) return;
    const text = e instanceof ApiError ? e.explain() : 'The quality reports could not be read.';
    $('#quality tbody').replaceChildren(message(text));
    return;
  }
  if (asked !== quality.asked) return;
  const body = $('#quality tbody');
  body.replaceChildren(...(reports.length ? reports.map(row) : [message('No bank yet.')]));
  labelCells($('#quality'));
}

// The banks shown (for their names); reads the reports again.
export function qualityFor(banks) {
  quality.banks = banks;
  loadQuality();
}

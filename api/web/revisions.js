// A bank's revision log as a table (/api/v1/revisions), and a board's
// provenance in a panel (/api/v1/boards/{eventId}): when it was received
// and known, where it is on the log, the publisher's source and reason,
// what became of it and the events that revised it.
//
// The reads name a board's event id only in the revision log (a correcting
// board's `eventId`, a revised board's `revisedEventId`), so a rate's board
// is looked up there: the last correction of its bank's board of that
// `asOf`. A board that was never revised is named by no read yet; its
// panel shows what the rates say of it.

import { ApiError, get } from './api.js';
import { $, h, labelCells } from './dom.js';
import { formatInstant, formatRate, formatTime } from './format.js';
import { known } from './known.js';

const FIELDS = ['cashBuying', 'cashSelling', 'transactionalBuying', 'transactionalSelling'];
const LABELS = {
  cashBuying: 'Cash buying',
  cashSelling: 'Cash selling',
  transactionalBuying: 'Transactional buying',
  transactionalSelling: 'Transactional selling',
};
const STATUS = {
  inForce: 'in force',
  superseded: 'superseded by a later board',
  corrected: 'corrected',
  retracted: 'retracted',
};
// Pages of a bank's log read to find a rate's board (1,000 revisions each).
const PAGES = 10;
// A list of changes longer than this is folded.
const FOLD = 4;
// A live board reads the log again after this long (boards come in bursts).
const REFRESH_MS = 2000;

const log = { bank: null, banks: new Map(), next: null, generation: 0, timer: null };

const utc = (iso) => h('time', { datetime: iso }, `${formatInstant(iso)} UTC`);
const bankName = (id) => log.banks.get(id)?.name ?? `Bank ${id}`;

// The bank's log as known at the instant shown (`to` is exclusive).
function logPath(bankId) {
  const query = new URLSearchParams({ bankId });
  if (known.at) query.set('to', new Date(new Date(known.at).getTime() + 1).toISOString());
  return `/api/v1/revisions?${query}`;
}

const boardButton = (eventId, text, title) => h('button', { type: 'button', class: 'link', 'data-board': eventId, title }, text);

function changeList(changes) {
  const items = changes.map((c) => h('li', {
    'data-currency': c.currencyCode, 'data-field': c.field, 'data-before': c.before ?? '', 'data-after': c.after ?? '',
  }, `${c.currencyCode} ${LABELS[c.field]?.toLowerCase() ?? c.field}: ${formatRate(c.before)} → `
    + `${c.after == null ? 'withdrawn' : formatRate(c.after)}`));
  const list = h('ul', { class: 'changes' }, ...items);
  return items.length > FOLD ? h('details', {}, h('summary', {}, `${items.length} values`), list) : list;
}

const reason = (r) => r.reason ?? h('span', { class: 'muted' }, 'none given');

function row(r) {
  return h('tr', { 'data-event': r.eventId, 'data-revised': r.revisedEventId, 'data-kind': r.kind },
    h('td', { 'data-field': 'knownAt' }, utc(r.knownAt)),
    h('td', { 'data-field': 'kind' }, r.kind === 'correction'
      ? boardButton(r.eventId, r.kind, 'The correcting board') : r.kind),
    h('td', { 'data-field': 'asOf' }, boardButton(r.revisedEventId, formatTime(r.asOf), 'The revised board')),
    h('td', { class: 'wrap', 'data-field': 'reason' }, reason(r)),
    h('td', { class: 'wrap', 'data-field': 'changes' }, changeList(r.changes)));
}

function message(text) {
  return h('tr', {}, h('td', { colspan: 5, class: 'muted' }, text));
}

// Reads the chosen bank's log again (or its next page, `more`).
export async function loadRevisions(more = false) {
  clearTimeout(log.timer);
  log.timer = null;
  const body = $('#revisions tbody');
  if (log.bank == null) {
    body.replaceChildren(message('No bank yet.'));
    $('#revisions-more').hidden = true;
    return;
  }
  if (!more) log.generation += 1;
  const generation = log.generation;
  let answer;
  try {
    answer = await get(more ? log.next : logPath(log.bank));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (generation === log.generation) body.replaceChildren(message(`The revision log: ${e.explain()}`));
    return;
  }
  if (generation !== log.generation) return;
  const rows = answer.data.revisions.map(row);
  if (more) body.append(...rows);
  else body.replaceChildren(...(rows.length ? rows : [message(`${bankName(log.bank)} has revised no board.`)]));
  log.next = answer.data.next;
  $('#revisions-more').hidden = !log.next;
  labelCells($('#revisions'));
}

// The banks the page shows: the log's choice keeps its bank, else takes
// `preferred` (the chart's), else the first by name.
export function revisionsFor(banks, preferred) {
  log.banks = banks;
  const sorted = [...banks.values()].sort((a, b) => a.name.localeCompare(b.name));
  const ids = sorted.map((b) => b.id);
  const wanted = [log.bank, Number(preferred)].find((id) => ids.includes(id)) ?? ids[0] ?? null;
  $('#revisions-bank').replaceChildren(...sorted.map((b) => h('option', { value: b.id }, b.name)));
  $('#revisions-bank').value = wanted ?? '';
  log.bank = wanted;
  loadRevisions();
}

// A live board of `bankId`: a correction or retraction shows soon.
export function boardLanded(bankId) {
  if (bankId === log.bank && !log.timer) log.timer = setTimeout(loadRevisions, REFRESH_MS);
}

// --- a board's provenance --------------------------------------------------

function fact(label, field, value, ...content) {
  return [h('dt', {}, label), h('dd', { 'data-field': field, 'data-value': value ?? '' }, ...content)];
}

function panel(title, ...content) {
  $('#provenance-title').textContent = title;
  $('#provenance-body').replaceChildren(...content.filter((c) => c != null && c !== false));
  const dialog = $('#provenance');
  if (!dialog.open) dialog.showModal();
  for (const table of dialog.querySelectorAll('table')) labelCells(table);
}

function ratesTable(rates) {
  return h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'provenance-rates' },
    h('caption', { class: 'muted' }, 'The rates as published'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Currency'),
      ...FIELDS.map((f) => h('th', { scope: 'col', class: 'num' }, LABELS[f])))),
    h('tbody', {}, ...rates.map((r) => h('tr', { 'data-currency': r.currency.id },
      h('th', { scope: 'row' }, r.currency.id),
      ...FIELDS.map((f) => h('td', { class: 'num', 'data-field': f, 'data-value': r[f] ?? '' }, formatRate(r[f]))))))));
}

function source(s) {
  if (!s) return fact('Source', 'source', null, h('span', { class: 'muted' }, 'none given'));
  return [
    ...fact('Source', 'source', s.url, s.url ? h('a', { href: s.url, rel: 'noopener noreferrer', target: '_blank' }, s.url) : '–'),
    ...fact('Taken by', 'method', s.method, s.method),
    ...fact('Captured at', 'capturedAt', s.capturedAt, s.capturedAt ? utc(s.capturedAt) : '–'),
    ...fact('SHA-256', 'sha256', s.sha256, s.sha256 ? h('code', {}, s.sha256) : '–'),
  ];
}

function revisionItem(r) {
  return h('li', { 'data-event': r.eventId, 'data-kind': r.kind },
    r.kind === 'correction' ? boardButton(r.eventId, 'Corrected', 'The correcting board') : 'Retracted',
    ' at ', utc(r.knownAt), ': ', reason(r), changeList(r.changes));
}

function showBoard(b) {
  const { log: at } = b;
  panel(`${bankName(b.bankId)}: the board of ${formatTime(b.asOf)}`,
    known.at && h('p', { class: 'muted' }, 'Its status and revisions are as known now, which may be later than the instant shown.'),
    h('dl', { class: 'facts' },
      ...fact('Status', 'status', b.status, h('strong', {}, STATUS[b.status] ?? b.status)),
      ...fact('As of', 'asOf', b.asOf, formatTime(b.asOf)),
      ...fact('Received at', 'receivedAt', b.receivedAt, b.receivedAt ? utc(b.receivedAt) : '–'),
      ...fact('Known at', 'knownAt', b.knownAt, b.knownAt ? utc(b.knownAt) : '–'),
      ...fact('On the log', 'log', at ? `${at.topic}/${at.partition}/${at.offset}` : null,
        at ? `${at.topic}, partition ${at.partition}, offset ${at.offset}` : 'not kept (folded before provenance was)'),
      ...source(b.source),
      ...fact('Reason', 'reason', b.reason, reason(b)),
      ...fact('Event id', 'eventId', b.eventId, h('code', {}, b.eventId))),
    ratesTable(b.rates),
    h('h3', {}, 'Revisions'),
    b.revisions.length
      ? h('ul', { id: 'provenance-revisions' }, ...b.revisions.map(revisionItem))
      : h('p', { class: 'muted', id: 'provenance-revisions' }, 'None: the board stands as published.'));
}

// The panel of the board `eventId`.
export async function openBoard(eventId) {
  panel('A board', h('p', { class: 'muted' }, 'Reading…'));
  try {
    showBoard((await get(`/api/v1/boards/${encodeURIComponent(eventId)}`)).data);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    panel('A board', h('p', { class: 'notice' }, e.explain()));
  }
}

// The board `bank` published at `asOf`, in force for `currency` (its
// entry of /rates, `entry`), found in the bank's revision log.
export async function openRateBoard(bank, currency, asOf, entry) {
  panel(`${bank.name}: the board of ${formatTime(asOf)}`, h('p', { class: 'muted' }, 'Looking for the board…'));
  const t = new Date(asOf).getTime();
  let found = null;
  try {
    let path = logPath(bank.id);
    for (let page = 0; path && page < PAGES; page += 1) {
      const answer = await get(path);
      // In the log's order: the last revision of that board says which is in force.
      for (const r of answer.data.revisions) {
        if (new Date(r.asOf).getTime() === t) found = r.kind === 'correction' ? r.eventId : null;
      }
      path = answer.data.next;
    }
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    panel(`${bank.name}: the board of ${formatTime(asOf)}`, h('p', { class: 'notice' }, e.explain()));
    return;
  }
  if (found) {
    await openBoard(found);
    return;
  }
  panel(`${bank.name}: the board of ${formatTime(asOf)}`,
    h('p', { class: 'muted', id: 'provenance-unnamed' }, 'This board was never revised, and the API names a board\'s event id '
      + 'only in its revision log: where it came from cannot be looked up from here yet.'),
    h('dl', { class: 'facts' },
      ...fact('As of', 'asOf', asOf, formatTime(asOf))),
    ratesTable([{ ...entry, currency: { id: currency } }]));
}

export function wireRevisions() {
  $('#revisions-bank').addEventListener('change', (e) => {
    log.bank = Number(e.target.value);
    loadRevisions();
  });
  $('#revisions-more').addEventListener('click', () => loadRevisions(true));
  // Any board named on the page (the log, the panel) opens in the panel.
  document.addEventListener('click', (e) => {
    const button = e.target.closest?.('button[data-board]');
    if (button) openBoard(button.dataset.board);
  });
  const dialog = $('#provenance');
  $('#provenance-close').addEventListener('click', () => dialog.close());
  // A click on the backdrop (the dialog itself, outside its content) closes it.
  dialog.addEventListener('click', (e) => { if (e.target === dialog) dialog.close(); });
}

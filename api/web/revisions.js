// A bank's revision log as a table (/api/v1/revisions), and a board's
// provenance in a panel (/api/v1/boards): when it was received and known,
// where it is on the log, the publisher's source and reason, what became
// of it and the events that revised it. A board opens from the log (by
// its event id) or from a rate (by its bank and `updatedAt`).

import { ApiError, get } from './api.js';
import { $, h, labelCells } from './dom.js';
import { FIELDS, LABELS, formatInstant, formatRate, formatTime } from './format.js';
import { known } from './known.js';

const STATUS = {
  inForce: 'in force',
  superseded: 'superseded by a later board',
  corrected: 'corrected',
  retracted: 'retracted',
};
// Pages of a bank's log read to find the board a rate showed then (1,000
// revisions each).
const PAGES = 10;
// A list of changes longer than this is folded.
const FOLD = 4;
// A live board reads the log again after this long (boards come in bursts).
const REFRESH_MS = 2000;

const log = { bank: null, banks: new Map(), next: null, generation: 0, timer: null };
// Each board asked for in the panel counts one: an answer to an earlier
// click, come late, is dropped.
let asked = 0;

const utc = (iso) => h('time', { datetime: iso }, `${formatInstant(iso)} UTC`);
const bankName = (id) => log.banks.get(id)?.name ?? `Bank ${id}`;

// The instant a millisecond after `iso`, the first not known at `iso`.
const after = (iso) => new Date(new Date(iso).getTime() + 1).toISOString();

// The bank's log as known at the instant shown (`to` is exclusive).
function logPath(bankId) {
  const query = new URLSearchParams({ bankId });
  if (known.at) query.set('to', after(known.at));
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
  if (bankId === log.bank && !log.timer) log.timer = setTimeout(() => loadRevisions(), REFRESH_MS);
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

// A value the board's `outliers` name: its cell says what it departed from.
function outlierNote(o) {
  const from = [o.previous != null && `its previous ${formatRate(o.previous)}`,
    o.median != null && `the other banks' median ${formatRate(o.median)}`].filter(Boolean);
  return `An outlier when published: far from ${from.join(' and ')}`;
}

function ratesTable(rates, outliers = []) {
  const flagged = new Map(outliers.map((o) => [`${o.currencyCode}/${o.field}`, o]));
  const cell = (r, f) => {
    const o = flagged.get(`${r.currency.id}/${f}`);
    return h('td', { class: o ? 'num outlier' : 'num', 'data-field': f, 'data-value': r[f] ?? '',
      title: o && outlierNote(o) }, formatRate(r[f]));
  };
  return h('div', { class: 'scroll' }, h('table', { class: 'stack', id: 'provenance-rates' },
    h('caption', { class: 'muted' }, outliers.length
      ? 'The rates as published; marked: outliers when published, not eligible for the best rates'
      : 'The rates as published'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Currency'),
      ...FIELDS.map((f) => h('th', { scope: 'col', class: 'num' }, LABELS[f])))),
    h('tbody', {}, ...rates.map((r) => h('tr', { 'data-currency': r.currency.id },
      h('th', { scope: 'row' }, r.currency.id),
      ...FIELDS.map((f) => cell(r, f)))))));
}

function source(s) {
  if (!s) return fact('Source', 'source', null, h('span', { class: 'muted' }, 'none given'));
  return [
    ...fact('Source', 'source', s.url, /^https?:/i.test(s.url ?? '')
      ? h('a', { href: s.url, rel: 'noopener noreferrer', target: '_blank' }, s.url) : (s.url ?? '–')),
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
    ratesTable(b.rates, b.outliers),
    h('h3', {}, 'Revisions'),
    b.revisions.length
      ? h('ul', { id: 'provenance-revisions' }, ...b.revisions.map(revisionItem))
      : h('p', { class: 'muted', id: 'provenance-revisions' }, 'None: the board stands as published.'));
}

// Shows the board `path` answers (a /api/v1/boards read) in the panel,
// unless another was asked for since `ask`.
async function show(path, title, ask) {
  try {
    const { data } = await get(path);
    if (ask === asked) showBoard(data);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (ask === asked) panel(title, h('p', { class: 'notice', id: 'provenance-missing' }, e.explain()));
  }
}

// The panel of the board `eventId`.
export function openBoard(eventId) {
  asked += 1;
  panel('A board', h('p', { class: 'muted' }, 'Reading…'));
  return show(`/api/v1/boards/${encodeURIComponent(eventId)}`, 'A board', asked);
}

// The board of `bank` that a rate of it shows, by the rate's `updatedAt`
// (`asOf`): the one in force for that asOf. As known at a past instant, a
// board revised since was the one in force then: the first revision of
// that asOf known after the instant names it.
export async function openRateBoard(bank, asOf) {
  asked += 1;
  const ask = asked;
  const title = `${bank.name}: the board of ${formatTime(asOf)}`;
  panel(title, h('p', { class: 'muted' }, 'Reading…'));
  let path = `/api/v1/boards?${new URLSearchParams({ bankId: bank.id, asOf })}`;
  if (known.at) {
    const t = new Date(asOf).getTime();
    let page = `/api/v1/revisions?${new URLSearchParams({ bankId: bank.id, from: after(known.at) })}`;
    try {
      for (let n = 0; page && n < PAGES; n += 1) {
        const answer = await get(page);
        const revision = answer.data.revisions.find((r) => new Date(r.asOf).getTime() === t);
        if (revision) {
          path = `/api/v1/boards/${revision.revisedEventId}`;
          break;
        }
        page = answer.data.next;
      }
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (ask === asked) panel(title, h('p', { class: 'notice' }, e.explain()));
      return;
    }
  }
  await show(path, title, ask);
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

// The dashboard: for one currency, the best rates, every bank side by side
// (its rates, or its spread and premium over the National Bank's reference
// rate), a chart over 30 days or a year and a converter, kept current by
// the live stream; or all of it as known at a past instant (known.js). A
// rate opens its board's provenance, and a bank's revisions show as a table
// (revisions.js). The view (currency, table, chart, sort, instant) lives in
// the URL.

import { alertFired, alertsFor, loadAlerts, wireAlerts } from './alerts.js';
import { ApiError, get, key } from './api.js';
import { drawChart } from './chart.js';
import { $, h, labelCells } from './dom.js';
import {
  FIELDS, LABELS, anonymousAccess, arrow, formatAmount, formatDay, formatRate, formatRecent, formatShortDay, formatTime,
  timeZone, zoneLabel,
} from './format.js';
import { known, knownNow, showKnownAt, wireKnownAt, withKnownAt } from './known.js';
import { qualityFor } from './quality.js';
import { boardLanded, openRateBoard, revisionsFor, wireRevisions } from './revisions.js';
import { parseSpreadSort, referenceNote, spreadRows } from './spreads.js';
import { Stream } from './stream.js';

// Buying: the bank pays the customer, so higher is better; selling: lower.
const HIGHER_IS_BETTER = { cashBuying: true, cashSelling: false, transactionalBuying: true, transactionalSelling: false };
// A live change redraws the chart at most this often (each redraw is a request).
const CHART_REFRESH_MS = 15000;
// A live board reads the spreads again after this long (boards come in bursts).
const SPREADS_REFRESH_MS = 2000;
// The chart reads the National Bank's days from this long before its range,
// to know the day in force when the range starts (weekends and holidays
// publish nothing).
const REFERENCE_LEAD_DAYS = 14;
const DAY_MS = 86400000;

const params = new URLSearchParams(location.search);
const state = {
  currency: (params.get('currency') || 'USD').toUpperCase(),
  chartBank: params.get('bank') || 'best',
  chartField: FIELDS.includes(params.get('field')) ? params.get('field') : 'cashBuying',
  range: params.get('range') === '1y' ? '1y' : '30d',
  sort: parseSort(params.get('sort')),
  tableView: params.get('view') === 'reference' ? 'reference' : 'rates',
  spreadSort: parseSpreadSort(params.get('ssort')),
  chartReference: params.get('reference') === '1',
  spreads: null,
  spreadsTimer: null,
  currencies: [],
  banks: new Map(),
  best: null,
  stream: null,
  chartTimer: null,
  chart: null,
  recentlyUpdated: new Set(),
  generation: 0,
};

function parseSort(text) {
  const [k, dir] = (text || '').split('-');
  if (k === 'name' || k === 'updatedAt' || FIELDS.includes(k)) {
    return { key: k, dir: dir === 'asc' ? 'asc' : 'desc' };
  }
  return { key: 'cashBuying', dir: 'desc' };
}

function saveView() {
  const query = new URLSearchParams({
    currency: state.currency,
    bank: state.chartBank,
    field: state.chartField,
    range: state.range,
    sort: `${state.sort.key}-${state.sort.dir}`,
    view: state.tableView,
    ssort: `${state.spreadSort.key}-${state.spreadSort.dir}`,
  });
  if (state.chartReference) query.set('reference', '1');
  if (known.at) query.set('knownAt', known.at);
  history.replaceState(null, '', `?${query}`);
}

// --- notices, the key and the live state ---------------------------------

function notice(text) {
  const p = $('#notice');
  p.textContent = text || '';
  p.hidden = !text;
}

function askForKey(reason) {
  $('#key-reason').textContent = `${reason} It is kept in this browser only.`;
  $('#key-form').hidden = false;
  $('#key').value = key.get();
  $('#key').focus();
}

// What the live badge says in each state; `key`: nothing is read until the
// reader gives a key.
const LIVE = {
  live: 'live',
  connecting: 'connecting',
  reconnecting: 'reconnecting…',
  offline: 'offline',
  key: 'enter an API key',
  paused: 'paused',
};

function setLive(stateName, error) {
  const live = $('#live');
  live.dataset.state = error?.status === 401 ? 'key' : stateName;
  live.textContent = LIVE[live.dataset.state];
  if (error?.status === 401) {
    askForKey(error.explain());
  } else if (error && error.status !== 0) {
    notice(`Live updates: ${error.explain()}`);
  } else if (stateName === 'live') {
    notice('');
  }
}

// Errors of the page's reads: a refused key asks for another, the rest are
// said and the read tried again.
function failed(error, retry) {
  if (!(error instanceof ApiError)) throw error;
  if (error.status === 401) {
    state.stream?.stop();
    setLive('key', error);
    return;
  }
  // A refused instant (later than the service's clock): said, not retried.
  if (error.status === 400 && error.errors?.asKnownAt) {
    notice(`Known at: ${error.errors.asKnownAt.join(' ')}`);
    return;
  }
  notice(error.explain());
  const seconds = Number(error.retryAfter);
  setTimeout(retry, (Number.isFinite(seconds) && seconds > 0 ? seconds : 5) * 1000);
}

// --- best rates -----------------------------------------------------------

function renderBest() {
  const cards = FIELDS.map((field) => {
    const best = state.best?.[field];
    if (!best) {
      return h('article', { class: 'card', 'data-field': field },
        h('h3', {}, LABELS[field]), h('p', { class: 'price' }, '–'),
        h('p', { class: 'muted' }, 'No bank quotes it.'));
    }
    const change = arrow(best.difference);
    return h('article', { class: 'card', 'data-field': field, 'data-value': best.price, 'data-bank': best.bank.id },
      h('h3', {}, LABELS[field]),
      h('p', { class: 'price' }, h('button', { type: 'button', class: 'rate', title: 'Where this rate came from' }, formatRate(best.price)),
        change && h('span', { class: `change ${change.cls}`, 'aria-label': change.label }, change.text)),
      h('p', { class: 'bank' }, best.bank.name),
      h('p', { class: 'muted' }, `Updated ${formatTime(best.updatedAt)}`));
  });
  $('#best').replaceChildren(...cards);
}

// --- the bank-by-bank table -----------------------------------------------

// Each bank quoting the currency: its entry for it.
function rows() {
  const out = [];
  for (const bank of state.banks.values()) {
    const entry = bank.exchangeRates?.find((e) => e.currency.id === state.currency);
    if (entry) out.push({ bank, entry });
  }
  const { key: k, dir } = state.sort;
  const sign = dir === 'asc' ? 1 : -1;
  const value = (r) => (k === 'name' ? r.bank.name : k === 'updatedAt' ? r.entry.updatedAt : r.entry[k]);
  out.sort((a, b) => {
    const va = value(a);
    const vb = value(b);
    if (va == null && vb == null) return a.bank.id - b.bank.id;
    if (va == null) return 1;
    if (vb == null) return -1;
    const c = typeof va === 'string' ? va.localeCompare(vb) : va - vb;
    return c !== 0 ? sign * c : a.bank.id - b.bank.id;
  });
  return out;
}

function renderTable() {
  const list = rows();
  const best = {};
  for (const field of FIELDS) {
    const values = list.map((r) => r.entry[field]).filter((v) => v != null);
    if (values.length) best[field] = HIGHER_IS_BETTER[field] ? Math.max(...values) : Math.min(...values);
  }
  const stale = new Set((state.spreads?.banks ?? []).filter((r) => r.stale).map((r) => r.bank.id));
  const body = list.map(({ bank, entry }) => h('tr', {
    'data-bank': bank.id,
    class: [state.recentlyUpdated.has(bank.id) && 'updated', stale.has(bank.id) && 'stale'].filter(Boolean).join(' ') || null,
  },
  h('th', { scope: 'row' }, bank.name),
  ...FIELDS.map((field) => {
    const v = entry[field];
    const change = arrow(entry.difference?.[field]);
    return h('td', {
      class: `num${v != null && v === best[field] ? ' best' : ''}`,
      'data-field': field,
      'data-value': v ?? '',
    }, v == null ? formatRate(v) : h('button', { type: 'button', class: 'rate', title: 'Where this rate came from' }, formatRate(v)),
    v != null && change && h('span', { class: `change ${change.cls}`, 'aria-label': change.label }, change.text));
  }),
  h('td', {}, h('time', { datetime: entry.updatedAt }, formatRecent(entry.updatedAt)),
    stale.has(bank.id) && h('span', { class: 'stale-tag' }, 'stale'))));
  if (body.length === 0) {
    body.push(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, `No bank quotes ${state.currency} now.`)));
  }
  $('#banks tbody').replaceChildren(...body);
  labelCells($('#banks'));
  for (const th of document.querySelectorAll('#banks th[data-key]')) {
    if (th.dataset.key === state.sort.key) th.setAttribute('aria-sort', state.sort.dir === 'asc' ? 'ascending' : 'descending');
    else th.removeAttribute('aria-sort');
  }
  renderChartBanks(list);
}

// --- the "vs National Bank" view --------------------------------------------

function renderSpreads() {
  const reference = state.tableView === 'reference';
  $('#banks').hidden = reference;
  $('#spreads').hidden = !reference;
  $('#reference-note').hidden = !reference;
  document.querySelector(`input[name="view"][value="${state.tableView}"]`).checked = true;
  $('#reference-note').textContent = referenceNote(state.spreads, state.currency);
  $('#spreads tbody').replaceChildren(...spreadRows(state.spreads, state.spreadSort, state.currency));
  labelCells($('#spreads'));
  for (const th of document.querySelectorAll('#spreads th[data-key]')) {
    if (th.dataset.key === state.spreadSort.key) th.setAttribute('aria-sort', state.spreadSort.dir === 'asc' ? 'ascending' : 'descending');
    else th.removeAttribute('aria-sort');
  }
}

async function loadSpreads() {
  clearTimeout(state.spreadsTimer);
  state.spreadsTimer = null;
  const generation = state.generation;
  let body;
  try {
    body = await get(withKnownAt(`/api/v1/rates/spreads?currencyCode=${state.currency}&transactional=true`));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) body = { data: null };
    else {
      failed(e, loadSpreads);
      return;
    }
  }
  if (generation !== state.generation) return;
  state.spreads = body.data;
  renderSpreads();
  renderTable();
}

function refreshSpreadsSoon() {
  if (!state.spreadsTimer) state.spreadsTimer = setTimeout(loadSpreads, SPREADS_REFRESH_MS);
}

function renderChartBanks(list) {
  const select = $('#chart-bank');
  const options = [h('option', { value: 'best' }, 'Best across banks')];
  for (const { bank } of [...list].sort((a, b) => a.bank.name.localeCompare(b.bank.name))) {
    options.push(h('option', { value: String(bank.id) }, bank.name));
  }
  select.replaceChildren(...options);
  select.value = state.chartBank;
  if (select.value !== state.chartBank) {
    select.value = 'best';
  }
}

// --- the chart ---------------------------------------------------------------

// YYYY-MM-DD of `date` in the service's time zone.
const isoDay = (date) => new Intl.DateTimeFormat('en-CA', {
  timeZone, year: 'numeric', month: '2-digit', day: '2-digit',
}).format(date);

async function loadChart() {
  clearTimeout(state.chartTimer);
  state.chartTimer = null;
  const generation = state.generation;
  const days = state.range === '1y' ? 365 : 30;
  const now = knownNow().getTime();
  const query = new URLSearchParams({
    currencyCode: state.currency,
    interval: 'day',
    from: isoDay(new Date(now - days * DAY_MS)),
  });
  const bankId = state.chartBank === 'best' ? null : state.chartBank;
  if (bankId) query.set('bankId', bankId);
  else query.set('field', state.chartField);
  let body;
  let reference = null;
  try {
    const referenceFrom = isoDay(new Date(now - (days + REFERENCE_LEAD_DAYS) * DAY_MS));
    const wanted = state.chartReference
      ? get(withKnownAt(`/api/v1/reference-rates/series?${new URLSearchParams({ currencyCode: state.currency, from: referenceFrom })}`))
        .catch((e) => {
          if (e instanceof ApiError && e.status === 404) return { data: { points: [] } };
          throw e;
        })
      : null;
    [body, reference] = await Promise.all([get(withKnownAt(`/api/v1/rates/series?${query}`)), wanted]);
  } catch (e) {
    failed(e, loadChart);
    return;
  }
  if (generation !== state.generation) return;
  // The weighted average premiums are measured against, in force from the
  // start of its day in Addis Ababa.
  const referencePoints = (reference?.data.points ?? [])
    .map((p) => ({ t: new Date(`${p.date}T00:00:00+03:00`), v: p.weightedAverage }));
  const from = body.data.from ? new Date(body.data.from) : null;
  const points = body.data.points
    .map((p) => ({ t: new Date(p.timestamp), v: bankId ? p[state.chartField] : p.value }))
    .filter((p) => p.v != null);
  const name = bankId ? ($('#chart-bank').selectedOptions[0]?.textContent ?? `bank ${bankId}`) : 'the best bank';
  state.chart = {
    points,
    options: {
      formatTime: state.range === '1y' ? formatDay : formatShortDay,
      empty: `No ${LABELS[state.chartField].toLowerCase()} rates of ${state.currency} in this range.`,
      reference: referencePoints,
      labels: {
        line: bankId ? `${LABELS[state.chartField]} at ${name}` : `Best ${LABELS[state.chartField].toLowerCase()}`,
        reference: 'National Bank weighted average',
      },
      legend: $('#chart-legend'),
      from,
    },
  };
  redrawChart();
  const values = points.map((p) => p.v);
  $('#chart-caption').textContent = points.length
    ? `${LABELS[state.chartField]} of ${state.currency} at ${name}, each day's rate at its end, `
      + `${formatDay(points[0].t)} to ${formatDay(points[points.length - 1].t)}: `
      + `low ${formatRate(Math.min(...values))}, high ${formatRate(Math.max(...values))}, `
      + `last ${formatRate(values[values.length - 1])}.`
      + (state.chartReference
        ? (referencePoints.length
          ? ` Dashed: the National Bank's weighted average, last ${formatRate(referencePoints[referencePoints.length - 1].v)}.`
          : ' The National Bank published no reference rate in this range.')
        : '')
    : `${LABELS[state.chartField]} of ${state.currency} at ${name}: no rates in this range.`;
}

// Drawn up to now, which moves on between redraws (or to the instant shown).
function redrawChart() {
  if (state.chart) drawChart($('#chart'), state.chart.points, { ...state.chart.options, to: knownNow() });
}

function refreshChartSoon() {
  if (!state.chartTimer) state.chartTimer = setTimeout(loadChart, CHART_REFRESH_MS);
}

// --- the converter ---------------------------------------------------------

function renderConverterCurrencies() {
  const codes = ['ETB', ...state.currencies.map((c) => c.id).filter((c) => c !== 'ETB')];
  for (const [id, fallback] of [['#from', state.currency], ['#to', 'ETB']]) {
    const select = $(id);
    const current = select.value || fallback;
    select.replaceChildren(...codes.map((c) => h('option', { value: c }, c)));
    select.value = codes.includes(current) ? current : fallback;
  }
}

async function convert(event) {
  event?.preventDefault();
  const amount = $('#amount').value;
  const table = $('#conversions');
  // Before any board quotes a currency there is nothing to convert from.
  if (!$('#from').value || !$('#to').value) {
    table.hidden = true;
    return;
  }
  const query = new URLSearchParams({ from: $('#from').value, to: $('#to').value, amount });
  if ($('#transactional').checked) query.set('transactional', 'true');
  let body;
  try {
    body = await get(withKnownAt(`/api/v1/convert?${query}`));
  } catch (e) {
    // A bad amount (400), or what no bank quotes (404): said, not retried.
    if (e instanceof ApiError && (e.status === 400 || e.status === 404)) {
      table.hidden = true;
      notice(`Converter: ${e.message}.`);
      return;
    }
    failed(e, convert);
    return;
  }
  notice('');
  const { data } = body;
  table.querySelector('caption').textContent = `${formatAmount(Number(data.amount))} ${data.from} in ${data.to}, best first`;
  const lines = data.results.map((r) => h('tr', { 'data-bank': r.bank.id },
    h('th', { scope: 'row' }, r.bank.name),
    h('td', { class: 'num', 'data-value': r.amount }, `${formatAmount(r.amount)} ${data.to}`),
    h('td', { class: 'num' }, formatRate(r.rate)),
    h('td', {}, r.legs.map((l) => `${l.currency} ${l.side} ${formatRate(l.rate)}`).join(', '))));
  if (lines.length === 0) lines.push(h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No bank quotes this pair now.')));
  table.querySelector('tbody').replaceChildren(...lines);
  labelCells(table);
  table.hidden = false;
}

// --- loading and live updates --------------------------------------------

function onEvent(name, data) {
  if (name === 'board' && data && typeof data.id === 'number') {
    // A snapshot repeats what the page shows; only a new board flashes.
    const before = state.banks.get(data.id);
    state.banks.set(data.id, data);
    if (before?.lastRatesUpdatedAt !== data.lastRatesUpdatedAt) {
      state.recentlyUpdated.add(data.id);
      setTimeout(() => state.recentlyUpdated.delete(data.id), 2000);
    }
    renderTable();
    refreshSpreadsSoon();
    boardLanded(data.id);
    if (String(data.id) === state.chartBank) refreshChartSoon();
  } else if (name === 'best' && data) {
    state.best = data;
    renderBest();
    if (state.chartBank === 'best') refreshChartSoon();
  } else if (name === 'alert') {
    alertFired(data);
  }
}

async function loadCurrency() {
  state.generation += 1;
  const generation = state.generation;
  state.stream?.stop();
  saveView();
  document.title = `${state.currency}: ratewire`;
  $('#best-title').textContent = known.at ? 'Best rates then' : 'Best rates today';
  try {
    const [best, rates] = await Promise.all([
      get(withKnownAt(`/api/v1/rates/best-rates?currencyCode=${state.currency}`)).catch((e) => {
        if (e instanceof ApiError && e.status === 404) return { data: null };
        throw e;
      }),
      get(withKnownAt('/api/v1/rates?transactional=true')),
    ]);
    if (generation !== state.generation) return;
    state.best = best.data;
    state.banks = new Map(rates.data.map((group) => group.data[0]).map((bank) => [bank.id, bank]));
  } catch (e) {
    failed(e, loadCurrency);
    return;
  }
  notice('');
  renderBest();
  renderTable();
  alertsFor(state.currency, state.banks);
  revisionsFor(state.banks, state.chartBank);
  qualityFor(state.banks);
  renderSpreads();
  loadSpreads();
  loadChart();
  // What was known then does not change: no stream while it is shown.
  if (known.at) {
    setLive('paused');
    return;
  }
  state.stream = new Stream({ currencyCode: state.currency, transactional: 'true' }, {
    onEvent,
    onState: setLive,
  });
}

async function start() {
  $('#zone').textContent = zoneLabel();
  showKnownAt();
  if (!key.get() && !anonymousAccess) {
    setLive('key');
    askForKey('This service needs an API key.');
    return;
  }
  $('#change-key').hidden = !key.get() && anonymousAccess;
  let currencies;
  try {
    currencies = await get(withKnownAt('/api/v1/currencies'));
  } catch (e) {
    failed(e, start);
    return;
  }
  $('#key-form').hidden = true;
  state.currencies = currencies.data;
  const codes = state.currencies.map((c) => c.id);
  if (!codes.includes(state.currency)) state.currency = codes.includes('USD') ? 'USD' : (codes[0] ?? 'USD');
  $('#currency').replaceChildren(...state.currencies.map((c) => h('option', { value: c.id }, `${c.id}: ${c.name}`)));
  $('#currency').value = state.currency;
  $('#chart-field').value = state.chartField;
  $('#chart-reference').checked = state.chartReference;
  document.querySelector(`input[name="range"][value="${state.range}"]`).checked = true;
  renderConverterCurrencies();
  await loadCurrency();
  convert();
  if (key.get()) loadAlerts();
}

// A rate of the table or of a best card: its board's provenance.
function openRate(event) {
  const button = event.target.closest('button.rate');
  if (!button) return;
  const card = button.closest('[data-field]');
  const row = button.closest('tr[data-bank]');
  const bank = state.banks.get(Number(row ? row.dataset.bank : card.dataset.bank));
  const asOf = row
    ? bank?.exchangeRates?.find((e) => e.currency.id === state.currency)?.updatedAt
    : state.best?.[card.dataset.field]?.updatedAt;
  if (bank && asOf) openRateBoard(bank, asOf);
}

function wire() {
  wireAlerts();
  wireRevisions();
  wireKnownAt(() => {
    state.stream?.stop();
    saveView();
    notice('');
    start();
  }, notice);
  $('#banks tbody').addEventListener('click', openRate);
  $('#best').addEventListener('click', openRate);
  $('#currency').addEventListener('change', (e) => {
    state.currency = e.target.value;
    state.chartBank = 'best';
    $('#from').value = state.currency;
    loadCurrency();
  });
  for (const th of document.querySelectorAll('#banks th[data-key]')) {
    th.querySelector('button').addEventListener('click', () => {
      const k = th.dataset.key;
      state.sort = state.sort.key === k
        ? { key: k, dir: state.sort.dir === 'asc' ? 'desc' : 'asc' }
        : { key: k, dir: k === 'name' || HIGHER_IS_BETTER[k] === false ? 'asc' : 'desc' };
      saveView();
      renderTable();
    });
  }
  for (const radio of document.querySelectorAll('input[name="view"]')) {
    radio.addEventListener('change', (e) => { state.tableView = e.target.value; saveView(); renderSpreads(); });
  }
  for (const th of document.querySelectorAll('#spreads th[data-key]')) {
    th.querySelector('button').addEventListener('click', () => {
      const k = th.dataset.key;
      state.spreadSort = state.spreadSort.key === k
        ? { key: k, dir: state.spreadSort.dir === 'asc' ? 'desc' : 'asc' }
        : { key: k, dir: k === 'updatedAt' ? 'desc' : 'asc' };
      saveView();
      renderSpreads();
    });
  }
  $('#chart-reference').addEventListener('change', (e) => { state.chartReference = e.target.checked; saveView(); loadChart(); });
  $('#chart-bank').addEventListener('change', (e) => { state.chartBank = e.target.value; saveView(); loadChart(); });
  $('#chart-field').addEventListener('change', (e) => { state.chartField = e.target.value; saveView(); loadChart(); });
  for (const radio of document.querySelectorAll('input[name="range"]')) {
    radio.addEventListener('change', (e) => { state.range = e.target.value; saveView(); loadChart(); });
  }
  $('#convert').addEventListener('submit', convert);
  $('#swap').addEventListener('click', () => {
    const from = $('#from').value;
    $('#from').value = $('#to').value;
    $('#to').value = from;
    convert();
  });
  $('#key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    key.set($('#key').value);
    $('#key-form').hidden = true;
    notice('');
    setLive('connecting');
    start();
  });
  $('#forget-key').addEventListener('click', () => {
    key.forget();
    $('#key').value = '';
    $('#alerts-section').hidden = true;
    state.stream?.stop();
    setLive(anonymousAccess ? 'offline' : 'key');
    if (anonymousAccess) {
      $('#key-form').hidden = true;
      start();
    }
  });
  $('#change-key').addEventListener('click', () => askForKey('Enter another API key.'));
  let resized;
  window.addEventListener('resize', () => {
    clearTimeout(resized);
    resized = setTimeout(redrawChart, 100);
  });
  window.addEventListener('offline', () => setLive('offline'));
}

wire();
start();

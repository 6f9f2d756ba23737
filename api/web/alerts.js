// The "Alerts" panel: the key's rate alerts, made and removed here, and
// each one firing as the live stream tells it (`alert` events). Alerts
// call webhooks; a key without one adds one first (its secret is shown
// once, to verify signatures with).

import { ApiError, get, send } from './api.js';
import { $, h, labelCells } from './dom.js';
import { LABELS, formatRate, formatRecent } from './format.js';

// Firings kept in the list.
const RECENT = 10;

const panel = { webhooks: [], alerts: [], banks: new Map(), currency: 'USD' };

function problem(error) {
  if (!(error instanceof ApiError)) return String(error);
  if (error.errors) {
    return Object.entries(error.errors).map(([field, messages]) => `${field} ${messages.join('; ')}`).join('. ');
  }
  return error.explain();
}

function showError(text) {
  const p = $('#alert-error');
  p.textContent = text;
  p.hidden = !text;
}

function bankName(id) {
  return id == null ? 'Best across banks' : (panel.banks.get(id)?.name ?? `Bank ${id}`);
}

function stateOf(alert) {
  if (alert.triggered == null) return 'waiting for a board';
  return alert.triggered ? 'triggered' : 'armed';
}

function render() {
  $('#alert-webhook').replaceChildren(...panel.webhooks.map((w) => h('option', { value: w.id },
    `${w.url}${w.status === 'active' ? '' : ` (${w.status})`}`)));
  $('#alert-form').hidden = panel.webhooks.length === 0;
  $('#alert-currency').textContent = panel.currency;
  const rows = panel.alerts.map((a) => h('tr', { 'data-alert': a.id },
    h('td', {}, a.currencyCode),
    h('td', {}, bankName(a.bankId)),
    h('td', {}, LABELS[a.field] ?? a.field),
    h('td', {}, a.condition),
    h('td', { class: 'num' }, formatRate(a.threshold)),
    h('td', { class: 'num', 'data-field': 'lastValue' }, formatRate(a.lastValue)),
    h('td', { 'data-field': 'state' }, stateOf(a)),
    h('td', { class: 'num', 'data-field': 'fired' }, String(a.fired)),
    h('td', {}, h('button', { type: 'button', class: 'delete', 'aria-label': `Delete the ${a.currencyCode} alert at ${a.threshold}` }, 'Delete'))));
  if (rows.length === 0) {
    rows.push(h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No alerts yet.')));
  }
  $('#alerts tbody').replaceChildren(...rows);
  labelCells($('#alerts'));
  for (const button of document.querySelectorAll('#alerts button.delete')) {
    button.addEventListener('click', () => remove(button.closest('tr').dataset.alert));
  }
}

export async function loadAlerts() {
  try {
    const [webhooks, alerts] = await Promise.all([get('/api/v1/webhooks'), get('/api/v1/alerts')]);
    panel.webhooks = webhooks.data;
    panel.alerts = alerts.data;
    $('#alerts-section').hidden = false;
    render();
  } catch (e) {
    // A keyless visitor has no alerts: the panel stays hidden.
    if (e instanceof ApiError && e.status === 401) $('#alerts-section').hidden = true;
    else showError(problem(e));
  }
}

// The page's currency and banks (a bank alert names one of them).
export function alertsFor(currency, banks) {
  panel.currency = currency;
  panel.banks = banks;
  const select = $('#alert-bank');
  const chosen = select.value;
  select.replaceChildren(h('option', { value: '' }, 'Best across banks'),
    ...[...banks.values()].sort((a, b) => a.name.localeCompare(b.name))
      .map((b) => h('option', { value: b.id }, b.name)));
  select.value = [...select.options].some((o) => o.value === chosen) ? chosen : '';
  render();
}

async function remove(id) {
  try {
    await send('DELETE', `/api/v1/alerts/${id}`);
    showError('');
  } catch (e) {
    showError(problem(e));
  }
  loadAlerts();
}

async function addWebhook(event) {
  event.preventDefault();
  try {
    const created = await send('POST', '/api/v1/webhooks', { url: $('#webhook-url').value.trim() });
    const secret = $('#webhook-secret');
    secret.textContent = `Webhook added. Its signing secret, shown only now: ${created.data.secret}`;
    secret.hidden = false;
    $('#webhook-url').value = '';
    showError('');
  } catch (e) {
    showError(problem(e));
  }
  loadAlerts();
}

async function addAlert(event) {
  event.preventDefault();
  const bank = $('#alert-bank').value;
  const body = {
    webhookId: $('#alert-webhook').value,
    currencyCode: panel.currency,
    field: $('#alert-field').value,
    condition: $('#alert-condition').value,
    threshold: Number($('#alert-threshold').value),
  };
  if (bank) body.bankId = Number(bank);
  try {
    await send('POST', '/api/v1/alerts', body);
    showError('');
  } catch (e) {
    showError(problem(e));
  }
  loadAlerts();
}

// An `alert` event of the live stream: listed, and the table read again.
export function alertFired(message) {
  const d = message?.data;
  if (!d) return;
  const item = h('li', { 'data-message': message.id },
    h('time', { datetime: message.timestamp }, formatRecent(message.timestamp)), ' ',
    `${d.currencyCode} ${(LABELS[d.field] ?? d.field).toLowerCase()} at ${d.bank.name} went ${d.condition} `
    + `${formatRate(d.threshold)}: ${formatRate(d.previous)} → ${formatRate(d.current)}`);
  const list = $('#alert-events');
  list.prepend(item);
  while (list.children.length > RECENT) list.lastElementChild.remove();
  loadAlerts();
}

export function wireAlerts() {
  $('#webhook-form').addEventListener('submit', addWebhook);
  $('#alert-form').addEventListener('submit', addAlert);
}

// Against a running stack: RATEWIRE_BASE_URL and RATEWIRE_API_KEY (as
// `deploy/stack up` prints them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { RatewireClient, RatewireError, verifyWebhook } from '../dist/index.js';

const baseUrl = process.env.RATEWIRE_BASE_URL ?? 'http://127.0.0.1:8080';
const apiKey = process.env.RATEWIRE_API_KEY;
const live = { skip: !apiKey && 'needs RATEWIRE_API_KEY and a running stack' };

test('rates are banks with their currencies', live, async () => {
  const client = new RatewireClient({ baseUrl, apiKey });
  const banks = await client.rates({ transactional: true });
  assert.ok(banks.length > 0);
  assert.ok(banks[0].exchangeRates[0].currency.symbol);
});

test('best rates name the bank; an unknown currency is a 404', live, async () => {
  const client = new RatewireClient({ baseUrl, apiKey });
  const best = await client.bestRates('USD');
  assert.ok(best.cashBuying.bank.name);
  await assert.rejects(client.bestRates('XXX'), (e) => e instanceof RatewireError && e.status === 404);
});

test('a bad date names the parameter', live, async () => {
  const client = new RatewireClient({ baseUrl, apiKey });
  await assert.rejects(client.history({ bankId: 1, date: 'nope' }), (e) => e.status === 400 && 'date' in e.errors);
});

test('a series follows its pages', live, async () => {
  const client = new RatewireClient({ baseUrl, apiKey });
  let points = 0;
  for await (const point of client.series({ bankId: 1, currencyCode: 'USD', interval: 'day', from: '2025-12-01' })) {
    assert.ok(point.timestamp);
    points++;
  }
  assert.ok(points > 300, `${points} points`);
});

test('the stream yields events with ids', live, async () => {
  const client = new RatewireClient({ baseUrl, apiKey });
  const stop = new AbortController();
  for await (const event of client.stream({ events: ['board'], signal: stop.signal })) {
    assert.equal(event.event, 'board');
    assert.ok(event.id);
    stop.abort();
    break;
  }
});

test('a signed call verifies and a changed body does not', async () => {
  const secret = 'whsec_' + Buffer.alloc(32, 'k').toString('base64');
  const now = Math.floor(Date.now() / 1000);
  const body = '{"type":"alert.triggered"}';
  const sign = (b) => 'v1,' + createHmac('sha256', Buffer.alloc(32, 'k')).update(`msg_1.${now}.${b}`).digest('base64');
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(now), 'webhook-signature': sign(body) };
  await verifyWebhook(secret, headers, body);
  await assert.rejects(verifyWebhook(secret, headers, body + ' '));
  await assert.rejects(verifyWebhook(secret, headers, body, now + 301));
});

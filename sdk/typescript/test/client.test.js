// The client against a running stack (env.js says which): typed answers,
// errors with their status, series across pages, the stream, and an
// alert's webhook call that verifies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { RatewireClient, RatewireError, verifyWebhook } from '@ratewire/client';
import { apiKey, bankId, baseUrl, eventually, keepPublishing, live, publish, publishing } from './env.js';

const client = () => new RatewireClient({ baseUrl, apiKey });

test('rates are banks with their currencies', live, async () => {
  const banks = await client().rates({ transactional: true });
  assert.ok(banks.length > 0);
  assert.ok(banks[0].exchangeRates[0].currency.symbol);
  assert.equal(typeof banks[0].exchangeRates[0].cashBuying, 'number');
});

test('banks and currencies', live, async () => {
  assert.ok((await client().banks()).some((bank) => bank.code));
  assert.ok((await client().currencies()).some((currency) => currency.symbol === 'USD'));
});

test('best rates name the bank; an unknown currency is a 404', live, async () => {
  const best = await client().bestRates('USD');
  assert.ok(best.cashBuying.bank.name);
  await assert.rejects(client().bestRates('XXX'), (e) => e instanceof RatewireError && e.status === 404);
});

test('a bad date names the parameter', live, async () => {
  await assert.rejects(client().history({ bankId: 1, date: 'nope' }), (e) => e.status === 400 && 'date' in e.errors);
});

test('a wrong key is a 401', live, async () => {
  const stranger = new RatewireClient({ baseUrl, apiKey: 'rwk_not_a_key' });
  await assert.rejects(stranger.rates(), (e) => e instanceof RatewireError && e.status === 401);
});

test('a series follows its pages', publishing, async () => {
  // The suite serves pages of a few points (RATEWIRE_SERIES_PAGE_POINTS)
  // and has published more boards than one page holds.
  const stamps = [];
  for await (const point of client().series({ bankId, currencyCode: 'USD', interval: 'raw' })) {
    assert.equal(typeof point.cashBuying, 'number');
    stamps.push(point.timestamp);
  }
  assert.ok(stamps.length >= Number(process.env.RATEWIRE_RAW_POINTS ?? 1), `${stamps.length} points`);
  assert.deepEqual([...stamps].sort(), stamps);
  assert.equal(new Set(stamps).size, stamps.length);
});

test('a conversion and the spreads', publishing, async () => {
  const conversion = await client().convert({ amount: 100, from: 'USD', to: 'ETB', bankId });
  assert.equal(conversion.from, 'USD');
  assert.equal(conversion.results[0].bank.id, bankId);
  const spreads = await client().spreads('USD');
  assert.ok(spreads.banks.some((row) => row.bank.id === bankId));
});

test('the stream yields events with ids, and lets go when the reader stops', publishing, async () => {
  const stop = keepPublishing();
  try {
    for await (const event of client().stream({ events: ['board'], bankIds: [bankId] })) {
      assert.equal(event.event, 'board');
      assert.ok(event.id);
      assert.equal(event.data.id, bankId);
      break;
    }
  } finally {
    stop();
  }
});

test("an alert calls its webhook with a signature that verifies", publishing, async () => {
  const calls = [];
  const server = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      calls.push({ headers: request.headers, body: Buffer.concat(chunks) });
      response.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const sdk = client();
    await publish('150', '160');
    const hook = await sdk.webhooks.create({ url: `http://127.0.0.1:${server.address().port}/ratewire` });
    assert.ok(hook.secret);
    const alert = await sdk.alerts.create({
      webhookId: hook.id, currencyCode: 'USD', field: 'cashBuying', condition: 'above', threshold: 170, bankId,
    });
    assert.ok((await sdk.alerts.list()).some((a) => a.id === alert.id));
    await publish('171.25', '175');
    const crossed = () => calls.find((call) => call.body.includes('threshold'));
    assert.ok(await eventually(crossed), 'no webhook call within 30 s');
    await verifyWebhook(hook.secret, crossed().headers, crossed().body);
    await assert.rejects(verifyWebhook(hook.secret, crossed().headers, Buffer.concat([crossed().body, Buffer.from(' ')])));
    await sdk.alerts.delete(alert.id);
    await sdk.webhooks.delete(hook.id);
    assert.ok(!(await sdk.alerts.list()).some((a) => a.id === alert.id));
    await assert.rejects(sdk.alerts.delete(alert.id), (e) => e.status === 404);
  } finally {
    server.close();
  }
});

test('what was known when, and where a number came from', publishing, async () => {
  const sdk = client();
  const before = new Date();
  await publish('153.75', '160');
  const usd = async (options = {}) => (await sdk.rates({ bankId, ...options }))[0].exchangeRates.find((r) => r.currency.symbol === 'USD');
  assert.ok(await eventually(async () => (await usd()).cashBuying === 153.75));
  assert.notEqual((await usd({ asKnownAt: before })).cashBuying, 153.75);

  // A rate names its board by its bank and `updatedAt`.
  const board = await sdk.boardAt({ bankId, asOf: (await usd()).updatedAt });
  assert.equal(board.rates[0].cashBuying, 153.75);
  assert.ok(board.log.topic && new Date(board.knownAt) >= before);
  assert.equal((await sdk.board(board.eventId)).eventId, board.eventId);

  const quality = await sdk.quality({ bankId, days: 1 });
  assert.ok(quality.boards >= 1);
  for await (const revision of sdk.revisions({ bankId })) assert.ok(revision.eventId);
});

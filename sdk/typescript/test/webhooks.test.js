// verifyWebhook without a stack: Standard Webhooks signatures over the
// message id, its time and the body.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { verifyWebhook } from '@ratewire/client';

const key = Buffer.alloc(32, 'k');
const secret = 'whsec_' + key.toString('base64');
const sign = (k, id, at, body) => 'v1,' + createHmac('sha256', k).update(`${id}.${at}.${body}`).digest('base64');

test('a signed call verifies and a changed body does not', async () => {
  const now = Math.floor(Date.now() / 1000);
  const body = '{"type":"rate.threshold_crossed"}';
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(now), 'webhook-signature': sign(key, 'msg_1', now, body) };
  await verifyWebhook(secret, headers, body);
  await verifyWebhook(secret, new Headers(headers), new TextEncoder().encode(body));
  await assert.rejects(verifyWebhook(secret, headers, body + ' '));
});

test('an old call is refused even when signed', async () => {
  const now = Math.floor(Date.now() / 1000);
  const headers = { 'webhook-id': 'msg_2', 'webhook-timestamp': String(now), 'webhook-signature': sign(key, 'msg_2', now, '{}') };
  await assert.rejects(verifyWebhook(secret, headers, '{}', now + 301));
});

test('any of several signatures verifies during a rotation', async () => {
  const now = Math.floor(Date.now() / 1000);
  const both = [sign(Buffer.alloc(32, 'o'), 'msg_3', now, '{}'), sign(key, 'msg_3', now, '{}')].join(' ');
  await verifyWebhook(secret, { 'webhook-id': 'msg_3', 'webhook-timestamp': String(now), 'webhook-signature': both }, '{}');
});

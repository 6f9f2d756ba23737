// What the live tests run against, from the environment: the API
// (RATEWIRE_BASE_URL, RATEWIRE_API_KEY) and, for the tests that move a rate,
// a bank's publisher (RATEWIRE_INGEST_URL, RATEWIRE_BANK_ID,
// RATEWIRE_PUBLISHER_TOKEN). The end-to-end suite sets them all
// (tests/tests/sdks.rs); without them the live tests are skipped.
export const baseUrl = process.env.RATEWIRE_BASE_URL ?? 'http://127.0.0.1:8080';
export const apiKey = process.env.RATEWIRE_API_KEY;
export const ingestUrl = process.env.RATEWIRE_INGEST_URL;
export const bankId = Number(process.env.RATEWIRE_BANK_ID ?? 0) || undefined;
const token = process.env.RATEWIRE_PUBLISHER_TOKEN;

export const live = { skip: !apiKey && 'needs RATEWIRE_API_KEY and a running stack' };
export const publishing = {
  skip: !(apiKey && ingestUrl && bankId && token) && "needs a bank's publisher (RATEWIRE_INGEST_URL, ...)",
};

/** A board for the test's bank with USD at these rates (JSON numbers as written), accepted. */
export async function publish(cashBuying, cashSelling) {
  const asOf = new Date().toISOString();
  const body = `{"asOf":"${asOf}","rates":[{"currency":"USD","cashBuying":${cashBuying},"cashSelling":${cashSelling}}]}`;
  const answer = await fetch(`${ingestUrl}/v1/banks/${bankId}/boards`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
  if (answer.status !== 202) throw new Error(`publishing: ${answer.status} ${await answer.text()}`);
}

/** Publishes every half second until the returned function is called. */
export function keepPublishing() {
  let step = 0;
  const timer = setInterval(() => {
    step += 1;
    publish(`151.${(step % 90) + 10}`, '161').catch(() => {});
  }, 500);
  return () => clearInterval(timer);
}

export async function eventually(check, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

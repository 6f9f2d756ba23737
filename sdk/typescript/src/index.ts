// The ratewire API from TypeScript: ESM, `fetch` and Web Crypto only, so it
// runs in Node 20 and in browsers alike. Types come from the served OpenAPI
// document's committed copy, sdk/openapi.json (src/schema.ts, `npm run types`;
// `npm test` fails when they differ).
import type { components } from './schema.js';

export type Schemas = components['schemas'];
export type Bank = Schemas['Bank'];
export type RatesBank = Schemas['RatesBank'];
export type Currency = Schemas['Currency'];
export type BestRates = Schemas['BestRates'];
export type HistoryRecord = Schemas['HistoryRecord'];
export type Alert = Schemas['Alert'];
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type Webhook = Schemas['Webhook'];
export type Conversion = Schemas['Conversion'];
export type Spreads = Schemas['Spreads'];
export type ReferenceRate = Schemas['ReferenceRate'];
export type SeriesPoint = Schemas['BankSeriesPoint'] | Schemas['BestSeriesPoint'];
export type Board = Schemas['Board'];
export type Revision = Schemas['Revision'];
export type Quality = Schemas['Quality'];

/** An instant for `asKnownAt` and its kin: a Date or RFC 3339 text. */
export type Instant = Date | string;
/** A read as it was known at an instant: the answer the API gave then. */
export interface KnownAt {
  asKnownAt?: Instant;
}

export interface ClientOptions {
  baseUrl: string;
  apiKey?: string;
  /** Wait out a 429's Retry-After and try again, up to this many times (default 0). */
  retryRateLimited?: number;
  fetch?: typeof fetch;
}

/** Any answer that is not a success: its status, message, and for a 400 the bad parameters. */
export class RatewireError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors: Record<string, string[]> = {},
    readonly retryAfter: number | null = null,
    readonly body: unknown = undefined,
  ) {
    super(`${status}: ${message}`);
    this.name = 'RatewireError';
  }
}

export interface StreamEvent {
  event: string;
  id: string | null;
  data: unknown;
}

/** A query string from an options object: unset and false values left out, lists comma-separated, dates in RFC 3339. */
function search(params: object): string {
  const out = new URLSearchParams();
  for (const [key, value] of Object.entries(params) as [string, unknown][]) {
    if (value === undefined || value === null || value === false) continue;
    out.set(key, Array.isArray(value) ? value.join(',') : value instanceof Date ? value.toISOString() : String(value));
  }
  const text = out.toString();
  return text ? `?${text}` : '';
}

/** The error an answer that is not a success stands for, from its parsed body. */
function failure(response: Response, parsed: any): RatewireError {
  const retryAfter = Number(response.headers.get('retry-after')) || null;
  return new RatewireError(response.status, String(parsed.message ?? ''), parsed.errors ?? {}, retryAfter, parsed);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class RatewireClient {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly retries: number;
  private readonly fetch: typeof fetch;

  readonly webhooks = {
    create: (body: { url: string; description?: string; events?: string[] }) =>
      this.data<CreatedWebhook>('POST', '/api/v1/webhooks', body),
    list: () => this.data<Webhook[]>('GET', '/api/v1/webhooks'),
    delete: (id: string) => this.send('DELETE', `/api/v1/webhooks/${encodeURIComponent(id)}`).then(() => undefined),
  };

  readonly alerts = {
    create: (body: Schemas['NewAlert']) => this.data<Alert>('POST', '/api/v1/alerts', body),
    list: () => this.data<Alert[]>('GET', '/api/v1/alerts'),
    delete: (id: string) => this.send('DELETE', `/api/v1/alerts/${encodeURIComponent(id)}`).then(() => undefined),
  };

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.headers = options.apiKey ? { 'x-api-key': options.apiKey } : {};
    this.retries = options.retryRateLimited ?? 0;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private async send(method: string, path: string, body?: unknown): Promise<any> {
    for (let attempt = 0; ; attempt++) {
      const response = await this.fetch(this.baseUrl + path, {
        method,
        headers: { ...this.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: any = {};
      try {
        parsed = text ? JSON.parse(text) : {};
      } catch {
        parsed = { message: text.slice(0, 200) };
      }
      if (response.ok) return parsed;
      const error = failure(response, parsed);
      if (response.status === 429 && attempt < this.retries) {
        await sleep((error.retryAfter ?? 1) * 1000);
        continue;
      }
      throw error;
    }
  }

  private async data<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await this.send(method, path, body)).data as T;
  }

  banks(options: { withRecent?: boolean } = {}): Promise<Bank[]> {
    return this.data('GET', `/api/v1/banks${search({ withRecentEx: options.withRecent })}`);
  }

  currencies(): Promise<Currency[]> {
    return this.data('GET', '/api/v1/currencies');
  }

  /** The banks' latest boards (api-v1's nested envelopes, flattened). */
  async rates(options: { bankId?: number; transactional?: boolean; socialLinks?: boolean } & KnownAt = {}): Promise<RatesBank[]> {
    const outer = await this.data<{ data: RatesBank[] }[]>('GET', `/api/v1/rates${search(options)}`);
    return outer.flatMap((inner) => inner.data);
  }

  bestRates(currencyCode: string, options: KnownAt = {}): Promise<BestRates> {
    return this.data('GET', `/api/v1/rates/best-rates${search({ currencyCode, ...options })}`);
  }

  history(options: { bankId: number; date: string; currencyCode?: string } & KnownAt): Promise<HistoryRecord> {
    return this.data('GET', `/api/v1/history${search(options)}`);
  }

  /** Every point of the range, following `next` page after page. */
  async *series(options: {
    bankId?: number;
    currencyCode?: string;
    interval?: 'raw' | 'hour' | 'day';
    from?: string;
    to?: string;
    field?: string;
  } & KnownAt = {}): AsyncGenerator<SeriesPoint> {
    yield* this.pages<SeriesPoint>(`/api/v1/rates/series${search(options)}`, 'points');
  }

  /** Each page's `key` items, following `next` until it is null. */
  private async *pages<T>(first: string, key: string): AsyncGenerator<T> {
    let path: string | null = first;
    while (path) {
      const page: any = await this.data('GET', path);
      yield* page[key] as T[];
      path = page.next ?? null;
    }
  }

  /** `amount` of `from` in `to` at each bank's rate (or one bank's), through birr. */
  convert(options: { amount: number | string; from: string; to: string; bankId?: number; transactional?: boolean } & KnownAt): Promise<Conversion> {
    return this.data('GET', `/api/v1/convert${search(options)}`);
  }

  /** Each bank's spread for a currency, beside the National Bank's reference. */
  spreads(currencyCode: string, options: { transactional?: boolean } & KnownAt = {}): Promise<Spreads> {
    return this.data('GET', `/api/v1/rates/spreads${search({ currencyCode, ...options })}`);
  }

  /** The National Bank's reference: one currency's, or every currency's. */
  referenceRates(options: { currencyCode: string; date?: string } & KnownAt): Promise<ReferenceRate>;
  referenceRates(options?: { date?: string } & KnownAt): Promise<ReferenceRate[]>;
  referenceRates(options: { currencyCode?: string; date?: string } & KnownAt = {}): Promise<ReferenceRate | ReferenceRate[]> {
    return this.data('GET', `/api/v1/reference-rates${search(options)}`);
  }

  /** A published board and where it came from: received and acknowledged when, its place in the log, its source, what revised it. */
  board(eventId: string): Promise<Board> {
    return this.data('GET', `/api/v1/boards/${encodeURIComponent(eventId)}`);
  }

  /** The bank's board for `asOf`, with its provenance: a rate's `updatedAt` names the board it came from. */
  boardAt(options: { bankId: number; asOf: Instant }): Promise<Board> {
    return this.data('GET', `/api/v1/boards${search(options)}`);
  }

  /** Corrections and retractions, oldest known first, across pages. */
  async *revisions(options: { bankId?: number; from?: Instant; to?: Instant } = {}): AsyncGenerator<Revision> {
    yield* this.pages<Revision>(`/api/v1/revisions${search(options)}`, 'revisions');
  }

  /** A bank's publishing record over `days` (or every bank's). */
  quality(options: { bankId: number; days?: number } & KnownAt): Promise<Quality>;
  quality(options?: { days?: number } & KnownAt): Promise<Quality[]>;
  quality(options: { bankId?: number; days?: number } & KnownAt = {}): Promise<Quality | Quality[]> {
    const { bankId, ...rest } = options;
    const path = bankId === undefined ? '/api/v1/quality' : `/api/v1/banks/${bankId}/quality`;
    return this.data('GET', `${path}${search(rest)}`);
  }

  /**
   * The live stream's events; a dropped connection is made again with Last-Event-ID.
   * With `snapshot`, it starts with every matching bank's board and currency's best rates.
   */
  async *stream(
    options: { events?: string[]; bankIds?: number[]; currencies?: string[]; snapshot?: boolean; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamEvent> {
    const query = search({ events: options.events, bankId: options.bankIds, currencyCode: options.currencies, snapshot: options.snapshot });
    let lastId: string | null = null;
    while (!options.signal?.aborted) {
      try {
        const response = await this.fetch(`${this.baseUrl}/api/v1/stream${query}`, {
          headers: { ...this.headers, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
          signal: options.signal,
        });
        if (!response.ok || !response.body) {
          throw failure(response, await response.json().catch(() => ({})));
        }
        for await (const event of events(response.body)) {
          if (event.id) lastId = event.id;
          yield event;
        }
      } catch (error) {
        if (error instanceof RatewireError || options.signal?.aborted) throw error;
      }
      await sleep(1000);
    }
  }
}

/** Server-sent events from a byte stream (the WHATWG rules). */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let name = '';
  let id: string | null = null;
  let data: string[] = [];
  const reader = body.getReader();
  // A caller that stops reading (break, return) lets the connection go.
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r?\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === '\r' ? newline + 2 : newline + 1);
        if (line === '') {
          if (data.length) {
            const text = data.join('\n');
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {}
            yield { event: name || 'message', id, data: parsed };
          }
          name = '';
          id = null;
          data = [];
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') name = value;
          else if (field === 'data') data.push(value);
          else if (field === 'id') id = value;
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** Throws unless `body` (the raw bytes or text received) was signed with `secret` within five minutes. */
export async function verifyWebhook(
  secret: string,
  headers: Record<string, string | undefined> | Headers,
  body: string | Uint8Array,
  now: number = Date.now() / 1000,
): Promise<void> {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name] ?? headers[name.toLowerCase()]) ?? undefined;
  const id = get('webhook-id');
  const timestamp = get('webhook-timestamp');
  const signatures = get('webhook-signature');
  if (!id || !timestamp || !signatures) throw new Error('the call is not signed');
  if (Math.abs(now - Number(timestamp)) > 300) throw new Error('the call is more than five minutes old');
  const raw = Uint8Array.from(atob(secret.replace(/^whsec_/, '')), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const message = new Uint8Array(prefix.length + bytes.length);
  message.set(prefix);
  message.set(bytes, prefix.length);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, message));
  const expected = `v1,${btoa(String.fromCharCode(...mac))}`;
  // Compared whole, in constant time over equal lengths.
  const same = (a: string, b: string) => a.length === b.length && [...a].reduce((d, c, i) => d | (c.charCodeAt(0) ^ b.charCodeAt(i)), 0) === 0;
  if (!signatures.split(' ').some((s) => same(s, expected))) throw new Error('no signature matches');
}

/** Any answer that is not a success: its status, message, and for a 400 the bad parameters. */
export class RatewireError extends Error {
    status;
    errors;
    retryAfter;
    body;
    constructor(status, message, errors = {}, retryAfter = null, body = undefined) {
        super(`${status}: ${message}`);
        this.status = status;
        this.errors = errors;
        this.retryAfter = retryAfter;
        this.body = body;
        this.name = 'RatewireError';
    }
}
/** A query string from an options object: unset and false values left out, lists comma-separated, dates in RFC 3339. */
function search(params) {
    const out = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) {
        if (value === undefined || value === null || value === false)
            continue;
        out.set(key, Array.isArray(value) ? value.join(',') : value instanceof Date ? value.toISOString() : String(value));
    }
    const text = out.toString();
    return text ? `?${text}` : '';
}
/** The error an answer that is not a success stands for, from its parsed body. */
function failure(response, parsed) {
    const retryAfter = Number(response.headers.get('retry-after')) || null;
    return new RatewireError(response.status, String(parsed.message ?? ''), parsed.errors ?? {}, retryAfter, parsed);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export class RatewireClient {
    baseUrl;
    headers;
    retries;
    fetch;
    webhooks = {
        create: (body) => this.data('POST', '/api/v1/webhooks', body),
        list: () => this.data('GET', '/api/v1/webhooks'),
        delete: (id) => this.send('DELETE', `/api/v1/webhooks/${encodeURIComponent(id)}`).then(() => undefined),
    };
    alerts = {
        create: (body) => this.data('POST', '/api/v1/alerts', body),
        list: () => this.data('GET', '/api/v1/alerts'),
        delete: (id) => this.send('DELETE', `/api/v1/alerts/${encodeURIComponent(id)}`).then(() => undefined),
    };
    constructor(options) {
        this.baseUrl = options.baseUrl.replace(/\/+$/, '');
        this.headers = options.apiKey ? { 'x-api-key': options.apiKey } : {};
        this.retries = options.retryRateLimited ?? 0;
        this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    }
    async send(method, path, body) {
        for (let attempt = 0;; attempt++) {
            const response = await this.fetch(this.baseUrl + path, {
                method,
                headers: { ...this.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
                body: body === undefined ? undefined : JSON.stringify(body),
            });
            const text = await response.text();
            let parsed = {};
            try {
                parsed = text ? JSON.parse(text) : {};
            }
            catch {
                parsed = { message: text.slice(0, 200) };
            }
            if (response.ok)
                return parsed;
            const error = failure(response, parsed);
            if (response.status === 429 && attempt < this.retries) {
                await sleep((error.retryAfter ?? 1) * 1000);
                continue;
            }
            throw error;
        }
    }
    async data(method, path, body) {
        return (await this.send(method, path, body)).data;
    }
    banks(options = {}) {
        return this.data('GET', `/api/v1/banks${search({ withRecentEx: options.withRecent })}`);
    }
    currencies() {
        return this.data('GET', '/api/v1/currencies');
    }
    /** The banks' latest boards (api-v1's nested envelopes, flattened). */
    async rates(options = {}) {
        const outer = await this.data('GET', `/api/v1/rates${search(options)}`);
        return outer.flatMap((inner) => inner.data);
    }
    bestRates(currencyCode, options = {}) {
        return this.data('GET', `/api/v1/rates/best-rates${search({ currencyCode, ...options })}`);
    }
    history(options) {
        return this.data('GET', `/api/v1/history${search(options)}`);
    }
    /** Every point of the range, following `next` page after page. */
    async *series(options = {}) {
        yield* this.pages(`/api/v1/rates/series${search(options)}`, 'points');
    }
    /** Each page's `key` items, following `next` until it is null. */
    async *pages(first, key) {
        let path = first;
        while (path) {
            const page = await this.data('GET', path);
            yield* page[key];
            path = page.next ?? null;
        }
    }
    /** `amount` of `from` in `to` at each bank's rate (or one bank's), through birr. */
    convert(options) {
        return this.data('GET', `/api/v1/convert${search(options)}`);
    }
    /** Each bank's spread for a currency, beside the National Bank's reference. */
    spreads(currencyCode, options = {}) {
        return this.data('GET', `/api/v1/rates/spreads${search({ currencyCode, ...options })}`);
    }
    referenceRates(options = {}) {
        return this.data('GET', `/api/v1/reference-rates${search(options)}`);
    }
    /** A published board and where it came from: received and acknowledged when, its place in the log, its source, what revised it. */
    board(eventId) {
        return this.data('GET', `/api/v1/boards/${encodeURIComponent(eventId)}`);
    }
    /** The bank's board for `asOf`, with its provenance: a rate's `updatedAt` names the board it came from. */
    boardAt(options) {
        return this.data('GET', `/api/v1/boards${search(options)}`);
    }
    /** Corrections and retractions, oldest known first, across pages. */
    async *revisions(options = {}) {
        yield* this.pages(`/api/v1/revisions${search(options)}`, 'revisions');
    }
    quality(options = {}) {
        const { bankId, ...rest } = options;
        const path = bankId === undefined ? '/api/v1/quality' : `/api/v1/banks/${bankId}/quality`;
        return this.data('GET', `${path}${search(rest)}`);
    }
    /**
     * The live stream's events; a dropped connection is made again with Last-Event-ID.
     * With `snapshot`, it starts with every matching bank's board and currency's best rates.
     */
    async *stream(options = {}) {
        const query = search({ events: options.events, bankId: options.bankIds, currencyCode: options.currencies, snapshot: options.snapshot });
        let lastId = null;
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
                    if (event.id)
                        lastId = event.id;
                    yield event;
                }
            }
            catch (error) {
                if (error instanceof RatewireError || options.signal?.aborted)
                    throw error;
            }
            await sleep(1000);
        }
    }
}
/** Server-sent events from a byte stream (the WHATWG rules). */
async function* events(body) {
    const decoder = new TextDecoder();
    let buffer = '';
    let name = '';
    let id = null;
    let data = [];
    const reader = body.getReader();
    // A caller that stops reading (break, return) lets the connection go.
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done)
                return;
            buffer += decoder.decode(value, { stream: true });
            let newline;
            while ((newline = buffer.search(/\r?\n/)) >= 0) {
                const line = buffer.slice(0, newline);
                buffer = buffer.slice(buffer[newline] === '\r' ? newline + 2 : newline + 1);
                if (line === '') {
                    if (data.length) {
                        const text = data.join('\n');
                        let parsed = text;
                        try {
                            parsed = JSON.parse(text);
                        }
                        catch { }
                        yield { event: name || 'message', id, data: parsed };
                    }
                    name = '';
                    id = null;
                    data = [];
                }
                else if (!line.startsWith(':')) {
                    const colon = line.indexOf(':');
                    const field = colon < 0 ? line : line.slice(0, colon);
                    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
                    if (field === 'event')
                        name = value;
                    else if (field === 'data')
                        data.push(value);
                    else if (field === 'id')
                        id = value;
                }
            }
        }
    }
    finally {
        await reader.cancel().catch(() => { });
    }
}
/** Throws unless `body` (the raw bytes or text received) was signed with `secret` within five minutes. */
export async function verifyWebhook(secret, headers, body, now = Date.now() / 1000) {
    const get = (name) => (headers instanceof Headers ? headers.get(name) : headers[name] ?? headers[name.toLowerCase()]) ?? undefined;
    const id = get('webhook-id');
    const timestamp = get('webhook-timestamp');
    const signatures = get('webhook-signature');
    if (!id || !timestamp || !signatures)
        throw new Error('the call is not signed');
    if (Math.abs(now - Number(timestamp)) > 300)
        throw new Error('the call is more than five minutes old');
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
    const same = (a, b) => a.length === b.length && [...a].reduce((d, c, i) => d | (c.charCodeAt(0) ^ b.charCodeAt(i)), 0) === 0;
    if (!signatures.split(' ').some((s) => same(s, expected)))
        throw new Error('no signature matches');
}

// Follows /api/v1/stream with fetch rather than EventSource: the key goes
// in a header (not in a URL that proxies log), and a refusal's status and
// Retry-After can be told to the reader. Reconnects by itself, resuming
// with Last-Event-ID.

import { ApiError, key } from './api.js';

// A connection that shows no sign of life this long (heartbeats come every
// 15 s) is taken for dead.
const SILENCE_MS = 40000;

export class Stream {
  // `onEvent(name, data)` for every event; `onState(state, error)` with
  // 'connecting', 'live' or 'reconnecting'.
  constructor(params, { onEvent, onState }) {
    this.params = params;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = null;
    this.failures = 0;
    this.stopped = false;
    this.controller = null;
    this.timer = null;
    this.run();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.controller?.abort();
  }

  async run() {
    while (!this.stopped) {
      let wait;
      try {
        await this.connect();
        wait = 500;
      } catch (e) {
        if (this.stopped) return;
        this.failures += 1;
        const error = e instanceof ApiError ? e : new ApiError(0, 'unreachable');
        const retry = Number(error.retryAfter);
        wait = Number.isFinite(retry) && retry > 0
          ? retry * 1000
          : Math.min(30000, 1000 * 2 ** Math.min(this.failures - 1, 5));
        this.onState('reconnecting', error);
        if (error.status === 401) return;
      }
      await new Promise((resolve) => { this.timer = setTimeout(resolve, wait); });
    }
  }

  async connect() {
    this.onState(this.lastId ? 'reconnecting' : 'connecting');
    const query = new URLSearchParams(this.params);
    // A fresh start begins with what is there now, so nothing landing
    // between the page's first reads and this connection is missed.
    if (!this.lastId) query.set('snapshot', 'true');
    const headers = { accept: 'text/event-stream' };
    const k = key.get();
    if (k) headers['x-api-key'] = k;
    if (this.lastId) headers['last-event-id'] = this.lastId;
    this.controller = new AbortController();
    let silence = setTimeout(() => this.controller.abort(), SILENCE_MS);
    const alive = () => {
      clearTimeout(silence);
      silence = setTimeout(() => this.controller.abort(), SILENCE_MS);
    };
    try {
      const response = await fetch(`/api/v1/stream?${query}`, { headers, signal: this.controller.signal });
      if (!response.ok) {
        const body = await response.json().catch(() => null);
        throw new ApiError(response.status, body?.message ?? response.statusText,
          response.headers.get('retry-after'));
      }
      this.failures = 0;
      this.onState('live');
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        alive();
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          this.frame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (e) {
      if (e.name === 'AbortError' && !this.stopped) return;
      throw e;
    } finally {
      clearTimeout(silence);
    }
  }

  frame(text) {
    let name = 'message';
    let id = null;
    const data = [];
    for (const line of text.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') name = value;
      else if (field === 'id') id = value;
      else if (field === 'data') data.push(value);
    }
    if (id) this.lastId = id;
    if (data.length === 0) return;
    let parsed;
    try {
      parsed = JSON.parse(data.join('\n'));
    } catch {
      parsed = data.join('\n');
    }
    this.onEvent(name, parsed);
  }
}

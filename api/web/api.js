// Calls to the read API with the key kept in this browser, and the errors
// a reader should see when a call is refused.

const KEY = 'ratewire.apiKey';

export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }

  // What the page says about it.
  explain() {
    if (this.status === 0) return 'The service cannot be reached. Retrying when it answers.';
    if (this.status === 401) {
      return this.message === 'API key is required'
        ? 'This service needs an API key.'
        : `The API key was refused (${this.message}). Enter another one.`;
    }
    if (this.status === 429) {
      const wait = this.retryAfter ? ` Try again in ${formatWait(this.retryAfter)}.` : '';
      return `${this.message}.${wait}`;
    }
    if (this.status === 503) return `The service is unavailable for a moment (${this.message}).`;
    return `${this.message} (${this.status}).`;
  }
}

function formatWait(seconds) {
  const s = Number(seconds);
  if (!Number.isFinite(s)) return `${seconds} s`;
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.ceil(s / 60)} min`;
  return `${Math.ceil(s / 3600)} h`;
}

export const key = {
  get: () => localStorage.getItem(KEY) || '',
  set: (value) => localStorage.setItem(KEY, value.trim()),
  forget: () => localStorage.removeItem(KEY),
};

// GET `path` (with its query); the parsed body, or an ApiError (with the
// answer's field `errors` for a 400).
export async function get(path, { signal } = {}) {
  const headers = { accept: 'application/json' };
  const k = key.get();
  if (k) headers['x-api-key'] = k;
  let response;
  try {
    response = await fetch(path, { headers, signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable');
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new ApiError(response.status, body?.message ?? response.statusText,
      response.headers.get('retry-after'));
    error.errors = body?.errors;
    throw error;
  }
  return body;
}

// POST or DELETE `path` with a JSON `body`; the parsed answer (null for
// 204), or an ApiError carrying the answer's field `errors`.
export async function send(method, path, body) {
  const headers = { accept: 'application/json', 'x-api-key': key.get() };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, 'unreachable');
  }
  const answer = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const error = new ApiError(response.status, answer?.message ?? response.statusText,
      response.headers.get('retry-after'));
    error.errors = answer?.errors;
    throw error;
  }
  return answer;
}

// The stream's URL: EventSource cannot send headers, so the key goes in
// the query (the API accepts it there on this endpoint only).
export function streamUrl(params) {
  const query = new URLSearchParams(params);
  const k = key.get();
  if (k) query.set('apiKey', k);
  return `/api/v1/stream?${query}`;
}

// The API reference, rendered from the served OpenAPI document: every
// operation with its parameters and answers, and a form to try it with
// the reader's key.

import { key } from './api.js';
import { $, h, labelCells } from './dom.js';

// How long "Try it" listens to the live stream before it hangs up.
const STREAM_LISTEN_MS = 5000;
// A parameter's allowed values listed in full up to this many.
const LISTED_VALUES = 12;
// Answer headers worth showing.
const SHOWN_HEADERS = ['content-type', 'etag', 'cache-control', 'retry-after',
  'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];

// Text with `code` spans, as nodes (never parsed as HTML).
function prose(text) {
  return (text || '').split('`').map((part, i) => (i % 2 ? h('code', {}, part) : part));
}

const slug = (method, path) => `${method}-${path}`.replace(/[^a-zA-Z0-9]+/g, '-').replace(/-$/, '');

function typeOf(schema = {}) {
  if (schema.$ref) return schema.$ref.split('/').pop();
  const type = Array.isArray(schema.type) ? schema.type.filter((t) => t !== 'null').join(' | ') : schema.type;
  const parts = [type || 'any'];
  if (schema.enum) {
    // A long list (every ISO 4217 code) is named by its first values; the
    // document has them all.
    parts.push(schema.enum.length > LISTED_VALUES
      ? `one of ${schema.enum.length} values (${schema.enum.slice(0, LISTED_VALUES).join(', ')}, …)`
      : `one of ${schema.enum.join(', ')}`);
  }
  if (schema.pattern) parts.push(`pattern ${schema.pattern}`);
  if (schema.minimum != null) parts.push(`≥ ${schema.minimum}`);
  if (schema.maximum != null) parts.push(`≤ ${schema.maximum}`);
  if (schema.format) parts.push(schema.format);
  return parts.join(', ');
}

function parameterTable(parameters) {
  if (!parameters.length) return h('p', { class: 'muted' }, 'No parameters.');
  const table = h('table', { class: 'stack' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'In'),
      h('th', { scope: 'col' }, 'Type'), h('th', { scope: 'col' }, 'Description'))),
    h('tbody', {}, ...parameters.map((p) => h('tr', {},
      h('th', { scope: 'row' }, h('code', {}, p.name), p.required ? ' (required)' : ''),
      h('td', {}, p.in),
      h('td', {}, typeOf(p.schema)),
      h('td', { class: 'wrap' }, ...prose(p.description))))));
  labelCells(table);
  return h('div', { class: 'scroll' }, table);
}

function responseList(responses = {}) {
  return h('ul', {}, ...Object.entries(responses).map(([status, r]) => {
    const schema = r.content && Object.values(r.content)[0]?.schema;
    return h('li', {}, h('code', {}, status), ' ', ...prose(r.description),
      schema ? h('span', { class: 'muted' }, ` (${typeOf(schema)})`) : null);
  }));
}

function tryForm(method, path, parameters) {
  const query = parameters.filter((p) => p.in === 'query');
  const form = h('form', { class: 'controls try' },
    ...query.map((p) => h('label', {}, p.name,
      h('input', { name: p.name, placeholder: p.schema?.default != null ? String(p.schema.default) : '', autocomplete: 'off' }))),
    h('button', { type: 'submit' }, `Send ${method.toUpperCase()}`));
  const output = h('div', { class: 'answer', 'aria-live': 'polite' });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const search = new URLSearchParams();
    for (const input of form.querySelectorAll('input')) {
      if (input.value !== '') search.set(input.name, input.value);
    }
    const url = `${path}${search.size ? `?${search}` : ''}`;
    output.replaceChildren(h('p', { class: 'muted' }, `Sending ${url} …`));
    const headers = {};
    if (key.get()) headers['x-api-key'] = key.get();
    const controller = new AbortController();
    const streaming = path.endsWith('/stream');
    try {
      const response = await fetch(url, { method: method.toUpperCase(), headers, signal: controller.signal });
      const shown = SHOWN_HEADERS.filter((n) => response.headers.has(n))
        .map((n) => `${n}: ${response.headers.get(n)}`).join('\n');
      let body;
      if (streaming && response.ok) {
        setTimeout(() => controller.abort(), STREAM_LISTEN_MS);
        body = '';
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            body += value;
          }
        } catch (e) {
          if (e.name !== 'AbortError') throw e;
        }
        body += `\n(listened for ${STREAM_LISTEN_MS / 1000} s)`;
      } else {
        const text = await response.text();
        try {
          body = JSON.stringify(JSON.parse(text), null, 2);
        } catch {
          body = text;
        }
      }
      output.replaceChildren(
        h('p', {}, h('strong', {}, `${response.status} ${response.statusText}`), ` GET ${url}`),
        h('pre', {}, shown),
        h('pre', { class: 'body' }, body.length > 20000 ? `${body.slice(0, 20000)}\n…` : body));
    } catch (e) {
      output.replaceChildren(h('p', {}, `The request failed: ${e.message}`));
    }
  });
  return h('details', {}, h('summary', {}, 'Try it'), form, output);
}

async function start() {
  $('#key').value = key.get();
  $('#key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    if ($('#key').value.trim()) key.set($('#key').value);
    else key.forget();
  });
  let spec;
  try {
    const response = await fetch('/api/v1/openapi.json');
    spec = await response.json();
  } catch (e) {
    const notice = $('#notice');
    notice.textContent = `The API description could not be read: ${e.message}`;
    notice.hidden = false;
    return;
  }
  $('#info').textContent = `${spec.info?.title ?? 'ratewire'} ${spec.info?.version ?? ''}, OpenAPI ${spec.openapi}.`;
  const toc = [];
  const sections = [];
  for (const [path, item] of Object.entries(spec.paths ?? {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const id = slug(method, path);
      const parameters = [...(item.parameters ?? []), ...(op.parameters ?? [])];
      // The method and the path may go to two lines; the path stays whole.
      toc.push(h('li', {},
        h('a', { href: `#${id}` }, h('code', {}, method.toUpperCase()), ' ', h('code', { class: 'path' }, path)),
        ...(op.summary ? [' ', ...prose(op.summary)] : [])));
      sections.push(h('section', { id, class: 'card operation', 'data-path': path },
        h('h2', {}, h('code', {}, `${method.toUpperCase()} ${path}`)),
        op.summary ? h('p', {}, ...prose(op.summary)) : null,
        op.description && op.description !== op.summary ? h('p', { class: 'wrap' }, ...prose(op.description)) : null,
        h('h3', {}, 'Parameters'),
        parameterTable(parameters),
        h('h3', {}, 'Answers'),
        responseList(op.responses),
        tryForm(method, path, parameters)));
    }
  }
  $('#toc').replaceChildren(...toc);
  $('#operations').replaceChildren(...sections);
  if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
}

start();

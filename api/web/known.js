// The "known at" picker: the page as it was known at a past instant. Each
// read of rate data then carries `asKnownAt` (the API answers what it
// would have answered then), the live stream is paused, a banner says so
// with a way back to live, and the instant is kept in the URL (`knownAt`)
// so that a link shows the same. The picker and the banner speak UTC, as
// the API's instants do.

import { $ } from './dom.js';
import { formatInstant } from './format.js';

// The instant written as the API writes it, or null for no instant.
function instant(text) {
  const date = text ? new Date(text) : null;
  return date && !Number.isNaN(date.getTime()) ? date.toISOString() : null;
}

// The instant shown (RFC 3339, UTC, to the millisecond), or null: live.
export const known = { at: instant(new URLSearchParams(location.search).get('knownAt')) };

// `path` asked as known at the instant shown, when one is.
export function withKnownAt(path) {
  if (!known.at) return path;
  return `${path}${path.includes('?') ? '&' : '?'}asKnownAt=${encodeURIComponent(known.at)}`;
}

// The page's "now": the instant shown, or the present.
export const knownNow = () => (known.at ? new Date(known.at) : new Date());

// Shows the instant in the picker and the banner (or live: neither).
export function showKnownAt() {
  const banner = $('#known-at-banner');
  banner.hidden = !known.at;
  document.body.classList.toggle('past', !!known.at);
  $('#known-at').max = new Date().toISOString().slice(0, 19);
  if (!known.at) return;
  // The picker holds whole seconds; the instant may be finer (a link).
  $('#known-at').value = known.at.slice(0, 19);
  const time = $('#known-at-time');
  time.dateTime = known.at;
  time.textContent = formatInstant(known.at);
}

// Wires the picker and "Back to live": `changed()` reads the page again
// once the instant changed; `refused(text)` says what was wrong with one.
export function wireKnownAt(changed, refused) {
  const go = (at) => {
    known.at = at;
    showKnownAt();
    changed();
  };
  $('#known-at-form').addEventListener('submit', (event) => {
    event.preventDefault();
    // The picker's value is a UTC time without its zone.
    const value = $('#known-at').value;
    const at = value ? instant(`${value}Z`) : null;
    if (!at) {
      refused('Choose a date and time to show.');
    } else if (new Date(at) > new Date()) {
      refused('What was known can be shown only for an instant that has passed.');
    } else {
      go(at);
    }
  });
  $('#back-to-live').addEventListener('click', () => go(null));
  $('#known-at').addEventListener('focus', showKnownAt);
}

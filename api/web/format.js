// Numbers in the reader's locale; times in the service's time zone, named.

// The four rates of a board, in the order the API lists them, and their names.
export const FIELDS = ['cashBuying', 'cashSelling', 'transactionalBuying', 'transactionalSelling'];
export const LABELS = {
  cashBuying: 'Cash buying',
  cashSelling: 'Cash selling',
  transactionalBuying: 'Transactional buying',
  transactionalSelling: 'Transactional selling',
};

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content ?? '';

export const timeZone = (() => {
  const zone = meta('ratewire-timezone');
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: zone });
    return zone;
  } catch {
    return 'UTC';
  }
})();

export const anonymousAccess = meta('ratewire-anonymous') === 'true';

const rate = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 4 });
const amount = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const change = new Intl.NumberFormat(undefined, {
  minimumFractionDigits: 2, maximumFractionDigits: 4, signDisplay: 'exceptZero',
});
const when = new Intl.DateTimeFormat(undefined, {
  timeZone, year: 'numeric', month: 'short', day: 'numeric',
  hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
});
// This year's times without the year, for narrow columns.
const recent = new Intl.DateTimeFormat(undefined, {
  timeZone, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
});
const day = new Intl.DateTimeFormat(undefined, { timeZone, year: 'numeric', month: 'short', day: 'numeric' });
const shortDay = new Intl.DateTimeFormat(undefined, { timeZone, month: 'short', day: 'numeric' });

// Four decimals always, as the API gives percentages, so a column lines up.
const signedPercent = new Intl.NumberFormat(undefined, {
  minimumFractionDigits: 4, maximumFractionDigits: 4, signDisplay: 'exceptZero',
});
const percent = new Intl.NumberFormat(undefined, { minimumFractionDigits: 4, maximumFractionDigits: 4 });

export const formatRate = (v) => (v == null ? '–' : rate.format(v));
// A premium is signed (above or below the reference); a spread is not.
export const formatPercent = (v, signed = false) => (v == null ? '–' : `${(signed ? signedPercent : percent).format(v)} %`);
export const formatAmount = (v) => amount.format(v);
export const formatChange = (v) => change.format(Number(v));
export const formatTime = (iso) => (iso ? when.format(new Date(iso)) : '–');
export const formatRecent = (iso) => {
  if (!iso) return '–';
  const date = new Date(iso);
  return date.getUTCFullYear() === new Date().getUTCFullYear() ? recent.format(date) : when.format(date);
};
export const formatDay = (iso) => day.format(new Date(iso));
// An instant as the API keeps it, in UTC to the millisecond (known-at
// times): "2026-11-29 08:12:41.377".
export const formatInstant = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').replace(/(\.000)?Z$/, '') : '–');
export const formatShortDay = (iso) => shortDay.format(new Date(iso));

// The zone as the reader sees it: its name and its abbreviation now.
export function zoneLabel() {
  const parts = new Intl.DateTimeFormat(undefined, { timeZone, timeZoneName: 'short' })
    .formatToParts(new Date());
  const short = parts.find((p) => p.type === 'timeZoneName')?.value;
  return short && short !== timeZone ? `${timeZone} (${short})` : timeZone;
}

// "▲ +0.25", "▼ -0.10" or "– 0" for a signed difference, with its class.
export function arrow(difference) {
  const n = Number(difference);
  if (difference == null || Number.isNaN(n)) return null;
  if (n > 0) return { text: `▲ ${formatChange(n)}`, cls: 'up', label: `up ${formatChange(n)}` };
  if (n < 0) return { text: `▼ ${formatChange(n)}`, cls: 'down', label: `down ${formatChange(n)}` };
  return { text: '– 0', cls: 'same', label: 'unchanged' };
}

/** How the console writes numbers and times: compact, locale-neutral, never "NaN". */

export function count(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  return Math.round(n).toLocaleString('en-US');
}

export function ms(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  if (n < 1000) return `${n < 10 ? n.toFixed(1) : Math.round(n)} ms`;
  if (n < 60_000) return `${(n / 1000).toFixed(1)} s`;
  if (n < 3_600_000) return `${Math.floor(n / 60_000)} min ${Math.round((n % 60_000) / 1000)} s`;
  const h = Math.floor(n / 3_600_000);
  return h < 48 ? `${h} h ${Math.floor((n % 3_600_000) / 60_000)} min` : `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

/** An ISO time as `2026-11-24 21:04:05` (UTC, which is what the server stores). */
export function time(iso: string | null | undefined): string {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', '');
}

/** The tail of an id: UUIDv7s share their leading (time) digits, their last twelve are random. */
export function shortId(id: string | null | undefined): string {
  return id ? `…${id.slice(-12)}` : '–';
}

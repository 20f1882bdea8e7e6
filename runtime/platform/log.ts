/**
 * Structured logging: one JSON object per line. Fields whose names suggest a
 * credential are replaced before the line is written, so a careless call
 * site cannot leak a token or a password into the log.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(event: string, fields?: LogFields): void;
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET_KEY = /token|password|secret|authorization|cookie|pepper|api_key|verifier|csrf/i;
// Log keys repeat endlessly; remember each verdict instead of re-testing it.
const verdicts = new Map<string, boolean>();
function isSecretKey(key: string): boolean {
  let v = verdicts.get(key);
  if (v === undefined) {
    v = SECRET_KEY.test(key);
    if (verdicts.size < 10_000) verdicts.set(key, v);
  }
  return v;
}

export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const k in value) {
    const v = (value as Record<string, unknown>)[k];
    out[k] = isSecretKey(k) ? '[redacted]' : redact(v, depth + 1);
  }
  return out;
}

export function jsonLogger(
  write: (line: string) => void,
  level: LogLevel = 'info',
  base: LogFields = {},
  now: () => number = Date.now,
): Logger {
  // The line is assembled as text rather than as a merged, redacted copy of
  // every field: the request log runs once per request, and building and
  // walking that copy cost more than the rest of a cheap route's pipeline.
  const baseKeys = Object.keys(base);
  let lastMs = NaN;
  let lastTs = '';
  const emit = (lvl: LogLevel, event: string, fields?: LogFields) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const ms = now();
    if (ms !== lastMs) {
      lastMs = ms;
      lastTs = new Date(ms).toISOString();
    }
    let line = `{"ts":"${lastTs}","level":"${lvl}","event":${JSON.stringify(event)}`;
    for (const k of baseKeys) if (fields === undefined || !(k in fields)) line += member(k, base[k]);
    if (fields !== undefined) line += members(fields);
    write(line + '}');
  };
  return {
    debug: (e, f) => emit('debug', e, f),
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
    child: (fields) => jsonLogger(write, level, { ...base, ...fields }, now),
  };
}

/**
 * The fields as JSON members (`,"a":1,"b":"x"`). Flat fields with no
 * credential-like name (the request log's, on every request) take one
 * JSON.stringify call instead of one per field.
 */
function members(fields: LogFields): string {
  for (const k in fields) {
    const v = fields[k];
    if (isSecretKey(k) || (typeof v === 'object' && v !== null)) {
      let out = '';
      for (const key in fields) out += member(key, fields[key]);
      return out;
    }
  }
  const text = JSON.stringify(fields);
  return text.length > 2 ? `,${text.slice(1, -1)}` : '';
}

const prefixes = new Map<string, string>();

/** `,"key":value` for one field, or nothing where JSON.stringify would drop it. */
function member(key: string, value: unknown): string {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return '';
  let prefix = prefixes.get(key);
  if (prefix === undefined) {
    prefix = `,${JSON.stringify(key)}:`;
    if (prefixes.size < 10_000) prefixes.set(key, prefix);
  }
  return prefix + (isSecretKey(key) ? '"[redacted]"' : JSON.stringify(typeof value === 'object' ? redact(value) : value));
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};

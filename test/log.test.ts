import { describe, expect, it } from 'vitest';
import { jsonLogger } from '../runtime/platform/log';

function capture(level: 'debug' | 'info' = 'debug', base = {}) {
  const lines: string[] = [];
  return { lines, log: jsonLogger((l) => lines.push(l), level, base, () => Date.UTC(2026, 10, 22, 1, 2, 3, 4)) };
}

describe('structured log', () => {
  it('writes one JSON object per call with time, level, event, base and fields', () => {
    const { lines, log } = capture('debug', { node: 'a' });
    log.info('http_request', { status: 200, route: '/api/v1/health', quote: 'say "hi"\n' });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      ts: '2026-11-22T01:02:03.004Z',
      level: 'info',
      event: 'http_request',
      node: 'a',
      status: 200,
      route: '/api/v1/health',
      quote: 'say "hi"\n',
    });
  });

  it('redacts credential-named fields at the top level and at any depth', () => {
    const { lines, log } = capture('debug', { api_key: 'k-base' });
    log.warn('x', { access_token: 't-1', nested: { Password: 'p-1', list: [{ client_secret: 's-1' }] }, authorization: 'Bearer b-1' });
    const line = lines[0]!;
    for (const secret of ['k-base', 't-1', 'p-1', 's-1', 'b-1']) expect(line).not.toContain(secret);
    expect(JSON.parse(line)).toMatchObject({ api_key: '[redacted]', access_token: '[redacted]', nested: { Password: '[redacted]', list: [{ client_secret: '[redacted]' }] } });
  });

  it('redacts a credential-named field among plain ones, and writes an empty field set as no members', () => {
    const { lines, log } = capture('debug');
    log.info('z', { n: 1, refresh_token: 'r-1', ok: true });
    log.info('empty', {});
    expect(lines[0]).not.toContain('r-1');
    expect(JSON.parse(lines[0]!)).toMatchObject({ n: 1, refresh_token: '[redacted]', ok: true });
    expect(JSON.parse(lines[1]!)).toEqual({ ts: '2026-11-22T01:02:03.004Z', level: 'info', event: 'empty' });
  });

  it('lets a field override a base field of the same name, once, and drops undefined values', () => {
    const { lines, log } = capture('debug', { match_id: 'base' });
    log.child({ mode: 'arena' }).error('y', { match_id: 'own', player_id: undefined, n: Number.NaN });
    const parsed = JSON.parse(lines[0]!);
    expect(parsed).toEqual({ ts: '2026-11-22T01:02:03.004Z', level: 'error', event: 'y', match_id: 'own', mode: 'arena', n: null });
    expect(lines[0]!.match(/match_id/g)).toHaveLength(1);
  });

  it('serialises an Error with its stack and honours the level', () => {
    const { lines, log } = capture('info');
    log.debug('hidden', {});
    log.error('boom', { error: new Error('bad thing') });
    expect(lines).toHaveLength(1);
    const parsed = JSON.parse(lines[0]!);
    expect(parsed.error).toMatchObject({ name: 'Error', message: 'bad thing' });
    expect(parsed.error.stack).toContain('bad thing');
  });
});

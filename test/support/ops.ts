import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { Capability } from '../../runtime/contracts/capabilities';
import { mintOperatorToken } from '../../runtime/ops/operators';
import type { Answer } from './calls';
import type { TestServer } from './server';

/** The operator secret the ops tests configure (visible ASCII, over the 32-character minimum). */
export const OPS_SECRET = 'ops-secret-0123456789abcdef-0123456789';

/** A GET on the ops plane with a bearer (the secret by default). */
export function opsGet(s: Pick<TestServer, 'call'>, path: string, bearer: string | null = OPS_SECRET, headers: Record<string, string> = {}): Promise<Answer> {
  return s.call('GET', `/api/v1/ops${path}`, { ...(bearer !== null ? { token: bearer } : {}), headers });
}

/** A POST on the ops plane with a JSON body and a bearer (the secret by default). */
export function opsPost(s: Pick<TestServer, 'call'>, path: string, body?: unknown, bearer: string | null = OPS_SECRET, headers: Record<string, string> = {}): Promise<Answer> {
  return s.call('POST', `/api/v1/ops${path}`, { ...(bearer !== null ? { token: bearer } : {}), ...(body !== undefined ? { body } : {}), headers });
}

export async function opsToken(caps: Capability[], options: { ttlSeconds?: number; name?: string; secret?: string; now?: number } = {}): Promise<string> {
  const minted = await mintOperatorToken(options.secret ?? OPS_SECRET, {
    caps,
    ttlSeconds: options.ttlSeconds ?? 900,
    jti: randomUUID(),
    ...(options.name !== undefined ? { name: options.name } : {}),
    ...(options.now !== undefined ? { now: options.now } : {}),
  });
  return minted.token;
}

/** The one refusal of the ops plane: 403 `forbidden` with empty details, nothing else in the body. */
export function expectOpsDenied(res: Answer): void {
  expect(res.status, JSON.stringify(res.body)).toBe(403);
  expect(res.body).toEqual({ error: { code: 'forbidden', message: expect.any(String), details: {} } });
}

/** Every page of a list, following `offset` until `total` is reached. */
export async function allPages(s: Pick<TestServer, 'call'>, path: string, limit: number): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  const sep = path.includes('?') ? '&' : '?';
  for (let offset = 0; ; offset += limit) {
    const res = await opsGet(s, `${path}${sep}limit=${limit}&offset=${offset}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    rows.push(...res.body.data);
    if (offset + limit >= res.body.page.total) return rows;
  }
}

import { expect } from 'vitest';
import type { TestServer } from './server';

/** A signed-in test player: the token pair as the API returned it. */
export interface TestPlayer {
  player_id: string;
  access_token: string;
  refresh_token: string;
  username: string;
  password: string;
}

let counter = 0;

/** A username unique within the run that passes rules 1.1. */
export function freshUsername(prefix = 'p'): string {
  counter++;
  return `${prefix}_${Date.now().toString(36)}${counter}`.slice(0, 32);
}

/** Registers a fresh password player on a server or an in-process app. */
export async function registerPlayer(s: Pick<TestServer, 'call'>, password = 'correct horse', prefix = 'p'): Promise<TestPlayer> {
  const username = freshUsername(prefix);
  const res = await s.call('POST', '/api/v1/auth/register', { body: { username, password } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...res.body, password };
}

export function expectError(res: { status: number; body: any }, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.details).toBeTypeOf('object');
  expect(res.body.error.details).not.toBeNull();
}

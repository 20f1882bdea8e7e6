import { randomBytes } from 'node:crypto';
import type { TestServer } from './server';

/** A pepper of the minimum usable length (32 bytes). */
export const PEPPER_V1 = 'pepper-v1-0123456789abcdef0123456789';
export const PEPPER_V2 = 'pepper-v2-0123456789abcdef0123456789';

let counter = 0;

/** A fresh device pair as a client would make it: a stable id and 32 random bytes, base64. */
export function newDevice(secretBytes = 32): { device_id: string; device_secret: string } {
  return { device_id: `device-${process.pid}-${++counter}-${randomBytes(4).toString('hex')}`, device_secret: randomBytes(secretBytes).toString('base64') };
}

export function guestSignIn(s: TestServer, body: unknown, headers: Record<string, string> = {}) {
  return s.call('POST', '/api/v1/auth/guest', { body, headers });
}

export function guestUpgrade(s: TestServer, token: string | undefined, body: unknown) {
  return s.call('POST', '/api/v1/auth/guest/upgrade', { body, ...(token ? { token } : {}) });
}

import type { Tokens } from '../client';

/**
 * What this page keeps in the browser. Tokens live in sessionStorage, so two
 * tabs can be two players and a reload stays signed in; the guest device
 * lives in localStorage, so "play as a guest" comes back as the same guest.
 */
const TOKENS_KEY = 'svc-play.tokens';
const DEVICE_KEY = 'svc-play.device';

export function savedTokens(): Tokens | null {
  try {
    const raw = sessionStorage.getItem(TOKENS_KEY);
    const parsed = raw ? (JSON.parse(raw) as Partial<Tokens>) : null;
    return parsed && typeof parsed.access_token === 'string' && typeof parsed.refresh_token === 'string'
      ? { access_token: parsed.access_token, refresh_token: parsed.refresh_token }
      : null;
  } catch {
    return null;
  }
}

export function saveTokens(tokens: Tokens | null): void {
  try {
    if (tokens) sessionStorage.setItem(TOKENS_KEY, JSON.stringify(tokens));
    else sessionStorage.removeItem(TOKENS_KEY);
  } catch {
    // Storage refused (private mode, quota): the session simply ends with the page.
  }
}

/** This browser's guest device: a stable id and a secret of 32 random bytes, made once. */
export function guestDevice(): { device_id: string; device_secret: string } {
  try {
    const raw = localStorage.getItem(DEVICE_KEY);
    if (raw) {
      const parsed = JSON.parse(raw) as { device_id?: unknown; device_secret?: unknown };
      if (typeof parsed.device_id === 'string' && typeof parsed.device_secret === 'string') {
        return { device_id: parsed.device_id, device_secret: parsed.device_secret };
      }
    }
  } catch {
    // A damaged entry is replaced below.
  }
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const device = { device_id: `web-${crypto.randomUUID()}`, device_secret: btoa(String.fromCharCode(...bytes)) };
  try {
    localStorage.setItem(DEVICE_KEY, JSON.stringify(device));
  } catch {
    // Without storage the guest lasts as long as this page.
  }
  return device;
}

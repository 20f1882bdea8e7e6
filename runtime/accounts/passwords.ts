import type { PasswordHasher } from '../contracts/services';
import { base64ToBytes, bytesToBase64, constantTimeEqual, randomBytes } from '../platform/crypto';

/**
 * Password hashes: salted PBKDF2-SHA256 through WebCrypto, whose `deriveBits`
 * runs on the host's worker pool rather than the event loop. The stored form
 * names algorithm, iteration count and salt, so raising `pbkdf2_iterations`
 * leaves older hashes verifiable at the count they were made with:
 *
 *   pbkdf2-sha256$<iterations>$<salt, base64>$<32-byte key, base64>
 */

const SCHEME = 'pbkdf2-sha256';
const SALT_BYTES = 16;
const KEY_BITS = 256;
/** Stored counts above this are treated as corrupt rather than run. */
const MAX_ITERATIONS = 10_000_000;
// Verifying against no account still derives a key at the current cost, so
// an unknown username and a wrong password take the same time.
const DUMMY_SALT = new Uint8Array(SALT_BYTES);

export function passwordHasher(options: { iterations: () => number; concurrency: number }): PasswordHasher {
  const slots = new Slots(Math.max(1, Math.floor(options.concurrency)));
  return {
    hash: (password) => slots.run(() => hashPassword(password, options.iterations())),
    verify: (password, stored) =>
      slots.run(async () => verifyPassword(password, typeof stored === 'function' ? await stored() : stored, options.iterations())),
  };
}

/** A FIFO counting semaphore. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}

export async function hashPassword(password: string, iterations: number): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, iterations);
  return `${SCHEME}$${iterations}$${bytesToBase64(salt)}$${bytesToBase64(key)}`;
}

/**
 * True when `password` matches `stored`. A null or unreadable `stored` (no
 * such account, no password on it) costs one derivation at `iterations` and
 * answers false.
 */
export async function verifyPassword(password: string, stored: string | null, iterations: number): Promise<boolean> {
  const parsed = stored === null ? null : parseStored(stored);
  if (!parsed) {
    await derive(password, DUMMY_SALT, iterations);
    return false;
  }
  const key = await derive(password, parsed.salt, parsed.iterations);
  return constantTimeEqual(key, parsed.key);
}

function parseStored(stored: string): { iterations: number; salt: Uint8Array<ArrayBuffer>; key: Uint8Array } | null {
  const parts = stored.split('$');
  if (parts.length !== 4 || parts[0] !== SCHEME) return null;
  const iterations = Number(parts[1]);
  if (!Number.isSafeInteger(iterations) || iterations < 1 || iterations > MAX_ITERATIONS) return null;
  const salt = base64ToBytes(parts[2]!);
  const key = base64ToBytes(parts[3]!);
  if (!salt || !key || salt.length === 0 || key.length !== KEY_BITS / 8) return null;
  return { iterations, salt, key };
}

async function derive(password: string, salt: Uint8Array<ArrayBuffer>, iterations: number): Promise<Uint8Array> {
  const material = await crypto.subtle.importKey('raw', new TextEncoder().encode(password), 'PBKDF2', false, ['deriveBits']);
  const bits = await crypto.subtle.deriveBits({ name: 'PBKDF2', hash: 'SHA-256', salt, iterations }, material, KEY_BITS);
  return new Uint8Array(bits);
}

import { jwtVerify, SignJWT } from 'jose';
import { CAPABILITIES, type Capability } from '../contracts/capabilities';
import type { AuditActor } from '../changes/audit';
import { constantTimeEqual } from '../platform/crypto';

/**
 * Who may call the operator plane, and with what. Two credentials open it,
 * both derived from the `ops_secret` setting: the secret itself as a bearer
 * (every capability), or a token minted with it that names its capabilities
 * and expires soon (decision 0036). Player tokens are never looked at here:
 * a bearer that is neither is simply not an operator.
 */

export function isCapability(value: unknown): value is Capability {
  return typeof value === 'string' && (CAPABILITIES as readonly string[]).includes(value);
}

export interface Operator {
  /** Which credential opened the plane. */
  source: 'ops_secret' | 'ops_token' | 'console';
  caps: ReadonlySet<Capability>;
  /** Who an audit row names for this caller. */
  actor: AuditActor;
}

/** Longest lifetime a minted token may claim: a leaked one must die on its own soon. */
export const TOKEN_TTL_MAX_S = 24 * 3600;
/**
 * Clock skew forgiven between the minting machine and the node, for the issue
 * time only: a token minted on a machine whose clock runs ahead works at once.
 * Its expiry is read by the node's clock exactly, so `--ttl` is what an
 * operator gets (give or take the machines' skew), never a minute more.
 */
const SKEW_S = 60;
const ISSUER = 'svc';
const AUDIENCE = 'svc-ops';
const TOKEN_TYPE = 'svc-ops+jwt';
/** The label the header or a token gives a person: printable ASCII, at most this many bytes. */
export const OPERATOR_LABEL_MAX = 64;
const DEFAULT_DISPLAY = 'operator';

/**
 * `x-svc-operator`: the person behind a shared secret, as they say. It only
 * ever attributes, and is dropped when empty, over 64 bytes, not printable
 * ASCII, or multi-valued (a repeated header reaches us joined by commas, so a
 * comma is read as more than one value).
 */
export function operatorLabel(value: string | null | undefined): string | null {
  if (value === null || value === undefined || value === '' || value.length > OPERATOR_LABEL_MAX) return null;
  if (!/^[\x20-\x7e]+$/.test(value) || value.includes(',')) return null;
  return value;
}

interface Keys {
  secret: string;
  digest: Uint8Array;
  signing: Uint8Array;
}
let keys: Keys | null = null;

/**
 * The secret's digest (compared in constant time, so neither content nor
 * length leaks) and the token-signing key, derived from it with HKDF so the
 * signing key is never the bearer secret itself. Kept for the last secret seen.
 */
async function keysFor(secret: string): Promise<Keys> {
  if (keys?.secret === secret) return keys;
  const raw = new TextEncoder().encode(secret);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', raw));
  const base = await crypto.subtle.importKey('raw', raw, 'HKDF', false, ['deriveBits']);
  const bits = await crypto.subtle.deriveBits(
    { name: 'HKDF', hash: 'SHA-256', salt: new TextEncoder().encode('svc ops'), info: new TextEncoder().encode('svc ops token v1') },
    base,
    256,
  );
  keys = { secret, digest, signing: new Uint8Array(bits) };
  return keys;
}

/**
 * The operator a bearer stands for, or null: no secret configured, no
 * bearer, a wrong secret, a token that does not verify, names an unknown
 * capability or lives longer than the maximum. Every null is the same 403.
 */
export async function authenticateOperator(secret: string | undefined, bearer: string | null, header: string | null, now: number): Promise<Operator | null> {
  if (!secret || !bearer) return null;
  const k = await keysFor(secret);
  const presented = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(bearer)));
  const label = operatorLabel(header);
  if (constantTimeEqual(presented, k.digest)) {
    return { source: 'ops_secret', caps: new Set(CAPABILITIES), actor: { id: 'ops_secret', display: label ?? DEFAULT_DISPLAY, source: 'ops_secret', attested: false } };
  }
  // A compact JWS has exactly three parts; anything else (a player token) is no operator.
  if (bearer.split('.').length !== 3) return null;
  return verifyToken(k.signing, bearer, label, now);
}

async function verifyToken(key: Uint8Array, token: string, label: string | null, now: number): Promise<Operator | null> {
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      typ: TOKEN_TYPE,
      currentDate: new Date(now),
      requiredClaims: ['exp', 'iat', 'jti'],
    }));
  } catch {
    return null;
  }
  const { caps, exp, iat, jti, name } = payload as { caps?: unknown; exp: number; iat: number; jti: unknown; name?: unknown };
  if (!Array.isArray(caps) || !caps.every(isCapability) || typeof jti !== 'string') return null;
  if (exp - iat > TOKEN_TTL_MAX_S || iat * 1000 > now + SKEW_S * 1000) return null;
  // A name signed into the token was put there by whoever holds the secret; the header is only a claim.
  const signedName = typeof name === 'string' ? operatorLabel(name) : null;
  return {
    source: 'ops_token',
    caps: new Set(caps),
    actor: { id: `ops_token:${jti}`, display: signedName ?? label ?? DEFAULT_DISPLAY, source: 'ops_token', attested: signedName !== null },
  };
}

export interface MintRequest {
  caps: readonly Capability[];
  ttlSeconds: number;
  /** The person the token is for, recorded as attested on audit rows. */
  name?: string;
  /** Epoch ms; defaults to now. */
  now?: number;
  jti: string;
}

/** A token for `npm run ops -- mint-token` (host/ops/main.ts). */
export async function mintOperatorToken(secret: string, request: MintRequest): Promise<{ token: string; expiresAt: number }> {
  if (request.caps.length === 0 || !request.caps.every(isCapability)) throw new Error(`capabilities must be some of ${CAPABILITIES.join(', ')}`);
  if (!Number.isInteger(request.ttlSeconds) || request.ttlSeconds < 1 || request.ttlSeconds > TOKEN_TTL_MAX_S) {
    throw new Error(`the lifetime must be 1 second to ${TOKEN_TTL_MAX_S / 3600} hours`);
  }
  if (request.name !== undefined && operatorLabel(request.name) === null) {
    throw new Error(`the name must be 1-${OPERATOR_LABEL_MAX} printable ASCII characters without a comma`);
  }
  const iat = Math.floor((request.now ?? Date.now()) / 1000);
  const exp = iat + request.ttlSeconds;
  const claims: Record<string, unknown> = { caps: [...new Set(request.caps)] };
  if (request.name !== undefined) claims.name = request.name;
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: TOKEN_TYPE })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .setJti(request.jti)
    .sign((await keysFor(secret)).signing);
  return { token, expiresAt: exp * 1000 };
}

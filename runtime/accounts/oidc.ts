import { createLocalJWKSet, decodeProtectedHeader, errors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { Clock } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { Logger } from '../platform/log';
import type { OidcProviderName, Settings } from '../contracts/settings';

/**
 * OIDC ID-token verification. Each configured
 * provider's discovery document and key set are fetched through the host's
 * fetch (which pins the trust anchor and bounds the time), cached, and
 * refreshed when a token names a key we do not hold, at most once per
 * cooldown so a stream of forged `kid`s cannot turn us into a request pump.
 */

/** The fetch a host hands the runtime; a rejection named `TimeoutError` means the time bound hit. */
export type OutboundFetch = (url: string, init?: { method?: string; headers?: Record<string, string>; body?: string }) => Promise<Response>;

/** What a verified token says about its subject. */
export interface VerifiedClaims {
  uid: string;
  email: string | null;
  displayName: string | null;
}

/** Keys and discovery are re-read after this long even when every `kid` is known. */
const KEYS_MAX_AGE_MS = 60 * 60 * 1000;
/** Minimum spacing of refreshes forced by an unknown `kid`. */
export const KEY_REFRESH_COOLDOWN_MS = 30_000;
const CLOCK_SKEW_SECONDS = 60;
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export function rejected(reason: string): ApiError {
  return new ApiError('auth.provider_rejected', 'The identity provider did not accept the token.', { reason });
}

interface KeyCache {
  verify: ReturnType<typeof createLocalJWKSet>;
  kids: Set<string>;
  fetchedAt: number;
}

export class OidcVerifier {
  #keys: KeyCache | null = null;
  #jwksUri: string | null = null;
  #lastFetch = -Infinity;
  #inflight: Promise<KeyCache> | null = null;

  constructor(
    readonly name: OidcProviderName,
    private readonly issuer: string,
    private readonly clientId: string,
    private readonly fetch: OutboundFetch,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  async verify(token: string): Promise<VerifiedClaims> {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      throw rejected('malformed');
    }
    const keys = await this.#keysFor(kid);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys.verify, {
        issuer: this.issuer,
        audience: this.clientId,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(this.clock.now()),
        requiredClaims: ['sub', 'exp'],
      }));
    } catch (err) {
      throw rejected(reasonOf(err));
    }
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255) throw rejected('bad_subject');
    return {
      uid: payload.sub,
      email: typeof payload.email === 'string' ? payload.email : null,
      displayName: typeof payload.name === 'string' && payload.name.trim() !== '' ? payload.name : null,
    };
  }

  /** Cached keys; fetched when absent or old, or when `kid` is unknown and the cooldown allows. */
  async #keysFor(kid: string | undefined): Promise<KeyCache> {
    const now = this.clock.now();
    const cached = this.#keys;
    const stale = !cached || now - cached.fetchedAt >= KEYS_MAX_AGE_MS;
    const unknownKid = !!cached && kid !== undefined && !cached.kids.has(kid) && now - this.#lastFetch >= KEY_REFRESH_COOLDOWN_MS;
    if (!stale && !unknownKid) return cached!;
    try {
      return await this.#refresh();
    } catch (err) {
      // A refresh that fails leaves what we had usable; with nothing, the token cannot be checked.
      if (cached) return cached;
      throw err;
    }
  }

  #refresh(): Promise<KeyCache> {
    this.#inflight ??= this.#load().finally(() => (this.#inflight = null));
    return this.#inflight;
  }

  async #load(): Promise<KeyCache> {
    this.#lastFetch = this.clock.now();
    if (!this.#jwksUri || !this.#keys || this.clock.now() - this.#keys.fetchedAt >= KEYS_MAX_AGE_MS) {
      this.#jwksUri = await this.#discover();
    }
    const body = await this.#getJson(this.#jwksUri, 'jwks_unreachable');
    const keys = (body as { keys?: unknown }).keys;
    if (!Array.isArray(keys)) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, what: 'jwks', error: 'no keys array' });
      throw rejected('jwks_unreachable');
    }
    const set = body as JSONWebKeySet;
    const cache: KeyCache = {
      verify: createLocalJWKSet(set),
      kids: new Set(set.keys.map((k) => k.kid).filter((k): k is string => typeof k === 'string')),
      fetchedAt: this.clock.now(),
    };
    this.#keys = cache;
    return cache;
  }

  async #discover(): Promise<string> {
    const url = `${this.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const doc = (await this.#getJson(url, 'discovery_unreachable')) as { issuer?: unknown; jwks_uri?: unknown };
    // OIDC Discovery 4.3: the document must name the issuer we asked about.
    if (doc.issuer !== this.issuer) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, what: 'discovery', error: 'issuer mismatch' });
      throw rejected('discovery_mismatch');
    }
    if (typeof doc.jwks_uri !== 'string' || !isHttpsUrl(doc.jwks_uri)) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, what: 'discovery', error: 'jwks_uri missing or not https' });
      throw rejected('discovery_invalid');
    }
    return doc.jwks_uri;
  }

  async #getJson(url: string, reason: string): Promise<unknown> {
    let response: Response;
    try {
      response = await this.fetch(url, { headers: { accept: 'application/json' } });
    } catch (err) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, url, error: err instanceof Error ? err.message : String(err) });
      throw rejected(reason);
    }
    if (!response.ok) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, url, status: response.status });
      throw rejected(reason);
    }
    try {
      const body = await response.json();
      if (body === null || typeof body !== 'object') throw new Error('not a JSON object');
      return body;
    } catch (err) {
      this.log.warn('oidc_fetch_failed', { provider: this.name, url, error: err instanceof Error ? err.message : String(err) });
      throw rejected(reason);
    }
  }
}

function reasonOf(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'expired';
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return 'wrong_audience';
    if (err.claim === 'iss') return 'wrong_issuer';
    if (err.claim === 'nbf') return 'not_yet_valid';
    return err.reason === 'missing' ? 'missing_claim' : 'invalid_claim';
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'bad_signature';
  if (err instanceof errors.JWKSNoMatchingKey) return 'unknown_key';
  if (err instanceof errors.JOSEAlgNotAllowed || err instanceof errors.JOSENotSupported) return 'bad_algorithm';
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid) return 'malformed';
  return 'invalid_token';
}

function isHttpsUrl(value: string): boolean {
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * One verifier per usable `oidc_providers` entry. An entry without an https
 * issuer or without a client id is dropped with a log line naming it; the
 * node starts, and the provider answers `auth.unsupported_provider`.
 */
export function oidcVerifiers(
  settings: Pick<Settings, 'oidc_providers'>,
  fetch: OutboundFetch,
  clock: Clock,
  log: Logger,
): Map<string, OidcVerifier> {
  const out = new Map<string, OidcVerifier>();
  for (const [name, entry] of Object.entries(settings.oidc_providers) as [OidcProviderName, { issuer?: string; client_id?: string }][]) {
    if (!entry.issuer) {
      log.warn('oidc_provider_dropped', { provider: name, reason: 'no issuer' });
      continue;
    }
    if (!isHttpsUrl(entry.issuer)) {
      log.warn('oidc_provider_dropped', { provider: name, reason: 'issuer is not an https URL' });
      continue;
    }
    if (!entry.client_id) {
      log.warn('oidc_provider_dropped', { provider: name, reason: 'no client_id' });
      continue;
    }
    out.set(name, new OidcVerifier(name, entry.issuer, entry.client_id, fetch, clock, log));
  }
  return out;
}

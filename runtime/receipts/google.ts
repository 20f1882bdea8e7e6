import { importPKCS8, SignJWT, type CryptoKey } from 'jose';
import type { OutboundFetch } from '../accounts/oidc';
import type { Clock } from '../contracts/context';
import type { Logger } from '../platform/log';
import type { GoogleReceiptView } from '../schemas/iap';
import type { VerifiedReceipt } from '../contracts/services';
import { ABSENT, storeText, verificationFailed } from './receipts';

/**
 * The second store's receipts: the purchase is read from the store's
 * publisher API with an access token, which a service-account JWT (RS256)
 * buys from the token endpoint. Both endpoints are settings, so a test (or
 * a proxy) can stand in for the store.
 */

/** The service-account key as the host read and checked it at boot. */
export interface ServiceAccountKey {
  clientEmail: string;
  /** PKCS#8 PEM of an RSA key. */
  privateKey: string;
  /** The key file's `private_key_id`, named in the JWT header when present. */
  keyId: string | null;
}

export interface GoogleOptions {
  packageName: string | undefined;
  /** Null when neither key setting is set. */
  key: ServiceAccountKey | null;
  tokenUrl: string;
  apiBase: string;
  /** Bounded by `provider_timeout_ms` in the host. */
  fetch: OutboundFetch;
  clock: Clock;
  log: Logger;
}

const SCOPE = 'https://www.googleapis.com/auth/androidpublisher';
const ASSERTION_TTL_S = 3600;
/** An access token is replaced this long before the store says it expires. */
const TOKEN_MARGIN_MS = 60_000;
/** `purchaseState` of a product purchase. */
const PURCHASED = 0;
const CANCELLED = 1;
const PENDING = 2;

interface AccessToken {
  value: string;
  expiresAt: number;
}

export class GooglePlayVerifier {
  #signingKey: Promise<CryptoKey> | null = null;
  #token: AccessToken | null = null;
  #exchange: Promise<AccessToken> | null = null;
  readonly #apiBase: string;

  constructor(private readonly options: GoogleOptions) {
    this.#apiBase = options.apiBase.replace(/\/+$/, '');
  }

  async verify(productId: string | undefined, purchaseToken: string | undefined): Promise<VerifiedReceipt<GoogleReceiptView>> {
    if (productId === undefined || purchaseToken === undefined) throw verificationFailed('missing_required_fields');
    const { packageName, key, log } = this.options;
    if (!packageName) throw verificationFailed('google_iap_not_configured');
    if (!key) throw verificationFailed('service_account_key_not_found');
    const token = await this.#accessToken(key);
    const url = `${this.#apiBase}/androidpublisher/v3/applications/${encodeURIComponent(packageName)}/purchases/products/${encodeURIComponent(productId)}/tokens/${encodeURIComponent(purchaseToken)}`;
    let response: Response;
    try {
      response = await this.options.fetch(url, { headers: { authorization: `Bearer ${token.value}`, accept: 'application/json' } });
    } catch (err) {
      // The URL carries the purchase token: log what failed, not where.
      log.warn('google_play_call_failed', { what: 'purchase', error: err instanceof Error ? err.name : 'unknown' });
      throw verificationFailed('google_api_unavailable');
    }
    if (response.status === 404 || response.status === 410) throw verificationFailed('purchase_not_found');
    if (!response.ok) {
      log.warn('google_play_call_failed', { what: 'purchase', status: response.status });
      // A token the store stopped honouring is dropped, so the next call buys another.
      if (response.status === 401) this.#token = null;
      throw verificationFailed(response.status >= 500 || response.status === 429 ? 'google_api_unavailable' : 'google_api_error');
    }
    const purchase = await jsonObjectOf(response);
    if (!purchase) throw verificationFailed('invalid_google_response');
    const state = purchase.purchaseState;
    if (state === CANCELLED) throw verificationFailed('purchase_cancelled');
    if (state === PENDING) throw verificationFailed('purchase_pending');
    if (state !== PURCHASED) throw verificationFailed('invalid_google_response');

    const orderId = storeText(purchase.orderId);
    const time = purchase.purchaseTimeMillis;
    const consumption = purchase.consumptionState;
    const acknowledgement = purchase.acknowledgementState;
    return {
      transactionId: orderId,
      originalTransactionId: null,
      productId: storeText(productId),
      view: {
        product_id: productId,
        order_id: orderId ?? ABSENT,
        purchase_time: typeof time === 'string' && /^\d{1,16}$/.test(time) ? time : typeof time === 'number' && Number.isSafeInteger(time) ? String(time) : ABSENT,
        consumption_state: consumption === 0 || consumption === 1 ? consumption : ABSENT,
        acknowledged: acknowledgement === 0 || acknowledgement === 1 ? acknowledgement === 1 : ABSENT,
        valid: true,
      },
    };
  }

  /** A cached access token while it lasts; concurrent callers share one exchange. */
  #accessToken(key: ServiceAccountKey): Promise<AccessToken> {
    const now = this.options.clock.now();
    if (this.#token && now < this.#token.expiresAt) return Promise.resolve(this.#token);
    this.#exchange ??= this.#exchangeAssertion(key)
      .then((token) => (this.#token = token))
      .finally(() => (this.#exchange = null));
    return this.#exchange;
  }

  async #exchangeAssertion(key: ServiceAccountKey): Promise<AccessToken> {
    const { tokenUrl, clock, log } = this.options;
    const failed = () => verificationFailed('google_token_exchange_failed');
    this.#signingKey ??= importPKCS8(key.privateKey, 'RS256');
    const issuedAt = Math.floor(clock.now() / 1000);
    const assertion = await new SignJWT({ scope: SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(key.keyId ? { kid: key.keyId } : {}) })
      .setIssuer(key.clientEmail)
      .setAudience(tokenUrl)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ASSERTION_TTL_S)
      .sign(await this.#signingKey);
    let response: Response;
    try {
      response = await this.options.fetch(tokenUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }).toString(),
      });
    } catch (err) {
      log.warn('google_play_call_failed', { what: 'token', error: err instanceof Error ? err.name : 'unknown' });
      throw failed();
    }
    if (!response.ok) {
      log.warn('google_play_call_failed', { what: 'token', status: response.status });
      throw failed();
    }
    const body = await jsonObjectOf(response);
    const value = body?.access_token;
    if (typeof value !== 'string' || value === '') throw failed();
    const lifetime = typeof body?.expires_in === 'number' && body.expires_in > 0 ? body.expires_in * 1000 : 0;
    return { value, expiresAt: clock.now() + lifetime - TOKEN_MARGIN_MS };
  }
}

async function jsonObjectOf(response: Response): Promise<Record<string, unknown> | null> {
  try {
    const value: unknown = await response.json();
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

import { base64url, compactVerify, decodeProtectedHeader, importSPKI } from 'jose';
import type { Clock } from '../contracts/context';
import type { AppleReceiptView } from '../schemas/iap';
import type { VerifiedReceipt } from '../contracts/services';
import { ABSENT, storeText, verificationFailed } from './receipts';

/**
 * The first store's receipts: StoreKit 2 signed transactions, compact JWS
 * with the signing certificate chain in the header (`x5c`, leaf first). The
 * chain must lead to a root the operator configured, the signature must
 * verify with the leaf's key (ES256 only), and the bundle id must be ours.
 */

/**
 * X.509 path checks live with the host (they need a certificate parser,
 * node:crypto in the Node host); the runtime hands it the chain and gets the
 * leaf's key back.
 */
export interface CertificateChain {
  /**
   * The leaf's public key (SPKI PEM) when `chain` (base64 DER, leaf first)
   * leads to a configured root and every certificate is valid at `at`;
   * otherwise throws `iap.verification_failed` with the reason.
   */
  leafKey(chain: readonly string[], at: Date): string;
}

export interface AppleOptions {
  /** Null when neither `apple_root_cert_path` nor `apple_root_certs` is set. */
  chain: CertificateChain | null;
  bundleId: string | undefined;
  clock: Clock;
}

/** Real signed transactions are a few KiB; anything near this is not one. */
const MAX_JWS_CHARS = 64 * 1024;
const SEGMENT = /^[A-Za-z0-9_-]+$/;
/** Leaf and intermediate; a copy of the root may follow. */
const CHAIN_MIN = 2;
const CHAIN_MAX = 3;

export class AppleVerifier {
  constructor(private readonly options: AppleOptions) {}

  async verify(jws: string): Promise<VerifiedReceipt<AppleReceiptView>> {
    const { chain, bundleId, clock } = this.options;
    if (!chain) throw verificationFailed('apple_root_cert_not_configured');
    if (!bundleId) throw verificationFailed('apple_iap_not_configured');
    const segments = jws.split('.');
    if (jws.length > MAX_JWS_CHARS || segments.length !== 3 || !segments.every((s) => SEGMENT.test(s))) throw verificationFailed('invalid_jws_format');
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(jws);
    } catch {
      throw verificationFailed('invalid_jws_format');
    }
    if (header.alg !== 'ES256') throw verificationFailed('invalid_jws');
    const x5c = header.x5c;
    if (!Array.isArray(x5c) || x5c.length < CHAIN_MIN || x5c.length > CHAIN_MAX || !x5c.every((c) => typeof c === 'string' && c !== '')) {
      throw verificationFailed('invalid_jws_format');
    }
    // Certificates are judged at the signing date, as the store's own verifier
    // does without online revocation checks: a receipt signed while its
    // certificate was valid stays verifiable after the certificate expires.
    // The date is read before the signature is checked, but from the very
    // bytes the signature then has to cover.
    const signedDate = jsonObject(segments[1]!)?.signedDate;
    const at = new Date(typeof signedDate === 'number' && Number.isFinite(signedDate) ? signedDate : clock.now());
    const leafKey = chain.leafKey(x5c, at);
    let payload: Record<string, unknown> | null;
    try {
      const key = await importSPKI(leafKey, 'ES256');
      const verified = await compactVerify(jws, key, { algorithms: ['ES256'] });
      payload = jsonObject(verified.payload);
    } catch {
      throw verificationFailed('invalid_jws');
    }
    if (!payload) throw verificationFailed('invalid_jws');
    if (payload.bundleId !== bundleId) throw verificationFailed('bundle_id_mismatch');

    const transactionId = storeText(payload.transactionId);
    const originalTransactionId = storeText(payload.originalTransactionId);
    const productId = storeText(payload.productId);
    const purchaseDate = epochMs(payload.purchaseDate);
    const expiresDate = epochMs(payload.expiresDate);
    const quantity = payload.quantity;
    return {
      transactionId,
      originalTransactionId,
      productId,
      view: {
        product_id: productId ?? ABSENT,
        transaction_id: transactionId ?? ABSENT,
        original_transaction_id: originalTransactionId ?? ABSENT,
        purchase_date: purchaseDate ?? ABSENT,
        expires_date: expiresDate ?? ABSENT,
        quantity: typeof quantity === 'number' && Number.isSafeInteger(quantity) && quantity > 0 ? quantity : 1,
        type: storeText(payload.type) ?? 'unknown',
        valid: expiresDate === null || expiresDate >= clock.now(),
      },
    };
  }
}

/** UTF-8 JSON (raw, or a base64url segment) as an object, or null. */
function jsonObject(bytes: Uint8Array | string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(typeof bytes === 'string' ? base64url.decode(bytes) : bytes));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function epochMs(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : null;
}

import type { OutboundFetch } from '../accounts/oidc';
import type { Clock } from '../contracts/context';
import type { ReceiptVerifiers } from '../contracts/services';
import type { Settings } from '../contracts/settings';
import type { Logger } from '../platform/log';
import type { AppleReceiptView, GoogleReceiptView } from '../schemas/iap';
import { AppleVerifier, type CertificateChain } from './apple';
import { GooglePlayVerifier, type ServiceAccountKey } from './google';

export interface ReceiptVerifierOptions {
  settings: Settings;
  /** The operator's roots, checked by the host; null when none is configured. */
  chain: CertificateChain | null;
  /** The service-account key the host read and checked at boot; null when none is configured. */
  googleKey: ServiceAccountKey | null;
  fetch: OutboundFetch;
  clock: Clock;
  log: Logger;
}

export function createReceiptVerifiers(options: ReceiptVerifierOptions): ReceiptVerifiers {
  const { settings, clock, log } = options;
  const apple = new AppleVerifier({ chain: options.chain, bundleId: settings.apple_bundle_id, clock });
  const google = new GooglePlayVerifier({
    packageName: settings.google_package_name,
    key: options.googleKey,
    tokenUrl: settings.google_token_url,
    apiBase: settings.google_play_api_base,
    fetch: options.fetch,
    clock,
    log,
  });
  return {
    apple: (signedTransaction) => apple.verify(signedTransaction),
    google: (productId, purchaseToken) => google.verify(productId, purchaseToken),
  };
}

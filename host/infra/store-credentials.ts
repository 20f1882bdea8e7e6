import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SettingsError, type Settings } from '../../runtime/contracts/settings';
import type { ServiceAccountKey } from '../../runtime/receipts/google';

/**
 * The stores' credentials, read and checked once at boot: the first store's
 * roots (`apple_root_cert_path`, `apple_root_certs`) and the second store's
 * service-account key (`google_service_account_key_path` or
 * `google_service_account_key`). A file that cannot be read, a certificate
 * that does not parse or is no CA, or a key that is not a usable RSA
 * service-account key stops the boot naming the setting. Unset settings are
 * not an error: the receipt routes then answer that the store is not configured.
 */
export interface StoreCredentials {
  appleRoots: X509Certificate[];
  googleKey: ServiceAccountKey | null;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export function readStoreCredentials(settings: Settings): StoreCredentials {
  const appleRoots: X509Certificate[] = [];
  const file = settings.apple_root_cert_path;
  if (file) appleRoots.push(...certificates('apple_root_cert_path', readSetting('apple_root_cert_path', file)));
  (settings.apple_root_certs ?? []).forEach((text, i) => appleRoots.push(...certificates(`apple_root_certs.${i}`, Buffer.from(text))));
  return { appleRoots, googleKey: serviceAccountKey(settings) };
}

function readSetting(key: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new SettingsError(key, `cannot read ${file}: ${(err as Error).message}`);
  }
}

/** PEM (one or more certificates), DER, or base64 DER. */
function certificates(key: string, content: Buffer): X509Certificate[] {
  const text = content.toString('latin1');
  const blocks = text.match(PEM_CERTIFICATE);
  const ders = blocks ? blocks.map((b) => Buffer.from(b)) : [/^[A-Za-z0-9+/=\s]+$/.test(text) ? Buffer.from(text, 'base64') : content];
  return ders.map((der) => {
    let certificate: X509Certificate;
    try {
      certificate = new X509Certificate(der);
    } catch (err) {
      throw new SettingsError(key, `holds no certificate that parses (${(err as Error).message})`);
    }
    if (!certificate.ca) throw new SettingsError(key, `${certificate.subject.replace(/\n/g, ', ')} is not a CA certificate`);
    return certificate;
  });
}

function serviceAccountKey(settings: Settings): ServiceAccountKey | null {
  const file = settings.google_service_account_key_path;
  const inline = settings.google_service_account_key;
  if (file && inline !== undefined) {
    throw new SettingsError('google_service_account_key', 'set either google_service_account_key or google_service_account_key_path, not both');
  }
  if (!file && inline === undefined) return null;
  const key = file ? 'google_service_account_key_path' : 'google_service_account_key';
  let json: unknown = inline;
  if (file || typeof inline === 'string') {
    try {
      json = JSON.parse(file ? readSetting(key, file).toString('utf8') : (inline as string));
    } catch (err) {
      if (err instanceof SettingsError) throw err;
      throw new SettingsError(key, 'is not a JSON service-account key');
    }
  }
  const fields = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  const { client_email: clientEmail, private_key: privateKey, private_key_id: keyId } = fields;
  if (typeof clientEmail !== 'string' || clientEmail === '') throw new SettingsError(key, 'the key has no client_email');
  // PKCS#8 is what the store issues and what WebCrypto imports.
  if (typeof privateKey !== 'string' || !privateKey.includes('-----BEGIN PRIVATE KEY-----')) throw new SettingsError(key, 'the key has no PKCS#8 private_key');
  try {
    if (createPrivateKey(privateKey).asymmetricKeyType !== 'rsa') throw new Error('not an RSA key');
  } catch (err) {
    throw new SettingsError(key, `private_key is not a usable RSA key (${(err as Error).message})`);
  }
  return { clientEmail, privateKey, keyId: typeof keyId === 'string' && keyId !== '' ? keyId : null };
}

import { X509Certificate } from 'node:crypto';
import type { CertificateChain } from '../../runtime/receipts/apple';
import { verificationFailed } from '../../runtime/receipts/receipts';

/**
 * The first store's certificate path, checked with node:crypto's X.509
 * (decision 0030): the presented chain (leaf, intermediate, maybe a copy of
 * the root) must end at one of the operator's roots, each link must be
 * issued and signed by a CA above it, every certificate must be valid at the
 * signing date, and the leaf and intermediate must carry the store's marker
 * extensions. The markers matter: the store's intermediates also issue
 * certificates to every developer, and only the marker tells a receipt
 * signer from a developer's own certificate.
 */

/** Marker extension of the store's receipt-signing leaf certificates. */
const RECEIPT_SIGNER_OID = '1.2.840.113635.100.6.11.1';
/** Marker extension of the store's intermediate that issues them. */
const RECEIPT_INTERMEDIATE_OID = '1.2.840.113635.100.6.2.1';

export class StoreCertificateChain implements CertificateChain {
  constructor(private readonly roots: readonly X509Certificate[]) {}

  leafKey(chain: readonly string[], at: Date): string {
    const certificates = chain.map(parse);
    // A copy of a configured root at the top is dropped: the root is trusted as configured, not as presented.
    const last = certificates[certificates.length - 1]!;
    const path = this.roots.some((r) => r.raw.equals(last.raw)) ? certificates.slice(0, -1) : certificates;
    const top = path[path.length - 1];
    if (!top) throw verificationFailed('certificate_chain_invalid');
    const root = this.roots.find((r) => top.checkIssued(r) && top.verify(r.publicKey));
    if (!root) throw verificationFailed('apple_root_cert_not_found');
    if (!validAt(root, at)) throw verificationFailed('apple_root_cert_invalid');
    if (path.length !== 2) throw verificationFailed('certificate_chain_invalid');
    const [leaf, intermediate] = path as [X509Certificate, X509Certificate];
    if (!intermediate.ca || !leaf.checkIssued(intermediate) || !leaf.verify(intermediate.publicKey)) throw verificationFailed('certificate_chain_invalid');
    if (!validAt(intermediate, at) || !validAt(leaf, at)) throw verificationFailed('certificate_expired');
    if (!extensionOids(intermediate.raw).has(RECEIPT_INTERMEDIATE_OID) || !extensionOids(leaf.raw).has(RECEIPT_SIGNER_OID)) {
      throw verificationFailed('certificate_purpose_invalid');
    }
    return leaf.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  }
}

function parse(base64Der: string): X509Certificate {
  try {
    return new X509Certificate(Buffer.from(base64Der, 'base64'));
  } catch {
    throw verificationFailed('invalid_jws_format');
  }
}

function validAt(certificate: X509Certificate, at: Date): boolean {
  const t = at.getTime();
  return Date.parse(certificate.validFrom) <= t && t <= Date.parse(certificate.validTo);
}

/**
 * The OIDs of a certificate's extensions, read from its DER (node's
 * X509Certificate names only a few extensions): Certificate → tbsCertificate
 * → the `[3]` element → one Extension sequence each, whose first element is
 * the OID. Anything malformed reads as no extensions.
 */
function extensionOids(der: Buffer): Set<string> {
  const oids = new Set<string>();
  try {
    const tbs = children(der, element(der, 0))[0]!;
    const wrapper = children(der, tbs).find((e) => der[e.at] === 0xa3);
    if (!wrapper) return oids;
    for (const extension of children(der, children(der, wrapper)[0]!)) {
      const id = children(der, extension)[0];
      if (id && der[id.at] === 0x06) oids.add(oidText(der.subarray(id.start, id.end)));
    }
  } catch {
    oids.clear();
  }
  return oids;
}

interface Element {
  /** Offset of the tag byte. */
  at: number;
  /** Contents, from `start` to `end`. */
  start: number;
  end: number;
}

/** The DER element at `at` (single-byte tags, definite lengths: all DER has). */
function element(der: Buffer, at: number): Element {
  let offset = at + 1;
  const first = der[offset++];
  if (first === undefined) throw new RangeError('truncated');
  let length = first;
  if (first & 0x80) {
    const bytes = first & 0x7f;
    if (bytes === 0 || bytes > 4) throw new RangeError('unsupported length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[offset++]!;
  }
  const end = offset + length;
  if (end > der.length) throw new RangeError('truncated');
  return { at, start: offset, end };
}

function children(der: Buffer, parent: Element): Element[] {
  const out: Element[] = [];
  for (let at = parent.start; at < parent.end; at = out[out.length - 1]!.end) out.push(element(der, at));
  return out;
}

function oidText(bytes: Buffer): string {
  const parts: number[] = [];
  let value = 0;
  for (const byte of bytes) {
    value = value * 128 + (byte & 0x7f);
    if (byte & 0x80) continue;
    if (parts.length === 0) parts.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
    else parts.push(value);
    value = 0;
  }
  return parts.join('.');
}

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CompactSign, importPKCS8 } from 'jose';

/**
 * A test stand-in for the first store's signing PKI, minted with the real
 * `openssl` at test time (as test/support/oidc-provider.ts does): a root, an
 * intermediate and a receipt-signing leaf carrying the store's marker
 * extensions, plus the broken variants each failure needs. `sign` makes a
 * StoreKit 2 style signed transaction with any of the chains.
 */

const INTERMEDIATE_MARKER = '1.2.840.113635.100.6.2.1=ASN1:NULL';
const LEAF_MARKER = '1.2.840.113635.100.6.11.1=ASN1:NULL';
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A certificate as `x5c` carries it (base64 DER) and its key (PKCS#8 PEM). */
interface Minted {
  x5c: string;
  key: string;
  pem: string;
}

export type ChainName =
  /** leaf, intermediate, root copy */
  | 'valid'
  /** leaf, intermediate */
  | 'withoutRoot'
  /** a whole chain under a root nobody configured */
  | 'unknownRoot'
  /** a leaf signed by an impostor with the intermediate's name */
  | 'forgedLink'
  /** the leaf's issuer is not a CA */
  | 'issuerNotCa'
  /** a leaf without the receipt-signer marker (a developer's certificate, say) */
  | 'unmarkedLeaf'
  /** the leaf alone */
  | 'leafOnly';

export class StoreCertificates {
  private constructor(
    readonly dir: string,
    private readonly chains: Record<ChainName, { x5c: string[]; key: string }>,
    /** The trusted root, PEM. */
    readonly rootPem: string,
    /** A certificate that is no CA (the leaf), PEM. */
    readonly leafPem: string,
  ) {}

  /** PEM file of the trusted root: what `apple_root_cert_path` names. */
  get rootFile(): string {
    return path.join(this.dir, 'root.pem');
  }

  static make(): StoreCertificates {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-store-pki-'));
    const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    const read = (name: string) => readFileSync(path.join(dir, name), 'utf8');
    const minted = (name: string): Minted => {
      const pem = read(`${name}.pem`);
      const x5c = pem.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '');
      return { x5c, key: read(`${name}.key`), pem };
    };
    const root = (name: string, days: number) => {
      run('req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', String(days), '-subj', `/CN=${name}`);
      return minted(name);
    };
    const issue = (name: string, issuer: string, days: number, extensions: string[], subject = name) => {
      writeFileSync(path.join(dir, `${name}.ext`), extensions.join('\n') + '\n');
      run('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${subject}`);
      run('x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.pem`, '-CAkey', `${issuer}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', String(days), '-extfile', `${name}.ext`);
      return minted(name);
    };
    const ca = (marker: boolean) => ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign', ...(marker ? [INTERMEDIATE_MARKER] : [])];
    const signer = (marker: boolean) => ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature', ...(marker ? [LEAF_MARKER] : [])];

    // Validity nests (root 3 days, intermediate 2, leaf 1) so a signing date
    // a day and a half ahead finds only the leaf expired.
    const trusted = root('root', 3);
    const intermediate = issue('intermediate', 'root', 2, ca(true));
    const leaf = issue('leaf', 'intermediate', 1, signer(true));
    const unmarked = issue('unmarked', 'intermediate', 1, signer(false));
    // The impostor's subject is the intermediate's name, so the forged leaf names the real intermediate as issuer.
    issue('impostor', 'root', 2, ca(true), 'intermediate');
    const forged = issue('forged', 'impostor', 1, signer(true));
    const notCa = issue('not-ca', 'root', 2, ['basicConstraints=critical,CA:FALSE', INTERMEDIATE_MARKER]);
    const underNotCa = issue('under-not-ca', 'not-ca', 1, signer(true));
    const stranger = root('stranger', 3);
    const strangerIntermediate = issue('stranger-intermediate', 'stranger', 2, ca(true));
    const strangerLeaf = issue('stranger-leaf', 'stranger-intermediate', 1, signer(true));

    return new StoreCertificates(
      dir,
      {
        valid: { x5c: [leaf.x5c, intermediate.x5c, trusted.x5c], key: leaf.key },
        withoutRoot: { x5c: [leaf.x5c, intermediate.x5c], key: leaf.key },
        unknownRoot: { x5c: [strangerLeaf.x5c, strangerIntermediate.x5c, stranger.x5c], key: strangerLeaf.key },
        forgedLink: { x5c: [forged.x5c, intermediate.x5c, trusted.x5c], key: forged.key },
        issuerNotCa: { x5c: [underNotCa.x5c, notCa.x5c, trusted.x5c], key: underNotCa.key },
        unmarkedLeaf: { x5c: [unmarked.x5c, intermediate.x5c, trusted.x5c], key: unmarked.key },
        leafOnly: { x5c: [leaf.x5c], key: leaf.key },
      },
      trusted.pem,
      leaf.pem,
    );
  }

  /** A signed transaction over `payload` with the named chain in its header. */
  async sign(payload: Record<string, unknown>, chain: ChainName = 'valid'): Promise<string> {
    const { x5c, key } = this.chains[chain];
    return new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
      .setProtectedHeader({ alg: 'ES256', x5c })
      .sign(await importPKCS8(key, 'ES256'));
  }

  /** The valid chain's header and key, for tests that build a token by hand. */
  chain(name: ChainName = 'valid'): { x5c: string[]; key: string } {
    return this.chains[name];
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

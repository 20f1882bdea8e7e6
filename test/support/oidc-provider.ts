import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';

/**
 * Test PKI made with the real `openssl` at test time: a CA and a server
 * certificate for 127.0.0.1 signed by it. `caFile` is what the service pins
 * through `oidc_ca_file`.
 */
export interface TestPki {
  dir: string;
  caFile: string;
  key: string;
  cert: string;
  remove(): void;
}

export function makePki(): TestPki {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-pki-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  run('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=svc test CA');
  run('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(
    path.join(dir, 'ext.cnf'),
    'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n',
  );
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf');
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    key: readFileSync(path.join(dir, 'server.key'), 'utf8'),
    cert: readFileSync(path.join(dir, 'server.pem'), 'utf8'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: Record<string, unknown>;
}

export async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

/**
 * A local OIDC provider over HTTPS on 127.0.0.1: discovery document, JWKS
 * (whatever keys are `published`), and ID tokens signed with jose. `jwksDown`
 * makes the key endpoint drop connections; `jwksFetches` counts key fetches.
 */
export class TestOidcProvider {
  published: SigningKey[] = [];
  jwksDown = false;
  jwksFetches = 0;
  discoveryFetches = 0;
  /** Overrides the discovery document's `issuer` (mismatch tests). */
  advertisedIssuer: string | null = null;

  private constructor(
    private readonly server: Server,
    readonly issuer: string,
  ) {}

  static async start(pki: TestPki, issuerPath = ''): Promise<TestOidcProvider> {
    let provider!: TestOidcProvider;
    const server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => provider.handle(req.url ?? '/', res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    provider = new TestOidcProvider(server, `https://127.0.0.1:${port}${issuerPath}`);
    return provider;
  }

  private handle(url: string, res: import('node:http').ServerResponse): void {
    const base = new URL(this.issuer).pathname.replace(/\/$/, '');
    if (url === `${base}/.well-known/openid-configuration`) {
      this.discoveryFetches++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ issuer: this.advertisedIssuer ?? this.issuer, jwks_uri: `${this.issuer}/jwks`, id_token_signing_alg_values_supported: ['RS256'] }));
      return;
    }
    if (url === `${base}/jwks`) {
      this.jwksFetches++;
      if (this.jwksDown) {
        res.socket?.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: this.published.map((k) => k.publicJwk) }));
      return;
    }
    res.writeHead(404).end();
  }

  /** Signs an ID token; claims default to a valid token for `audience` with `sub`. */
  async token(
    key: SigningKey,
    options: { sub?: string; audience?: string; issuer?: string; expiresAt?: number; notBefore?: number; claims?: JWTPayload; now?: number },
  ): Promise<string> {
    const now = Math.floor((options.now ?? Date.now()) / 1000);
    const jwt = new SignJWT({ name: 'Ada Lovelace', email: 'ada@example.test', ...(options.claims ?? {}) })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid })
      .setSubject(options.sub ?? `sub-${Math.random().toString(36).slice(2)}`)
      .setIssuer(options.issuer ?? this.issuer)
      .setAudience(options.audience ?? 'svc-client')
      .setIssuedAt(now)
      .setExpirationTime(options.expiresAt ?? now + 600);
    if (options.notBefore !== undefined) jwt.setNotBefore(options.notBefore);
    return jwt.sign(key.privateKey);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}

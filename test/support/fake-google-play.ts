import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { importSPKI, jwtVerify } from 'jose';

/**
 * A local fake of the second store on loopback: the OAuth token endpoint
 * (checks the service-account JWT against the public key of the account that
 * signed it) and the publisher API's product-purchase read. Accounts behave
 * by their email's local part: `refused` gets a 400, `hangs` no answer,
 * `garbled` a body that is not JSON; any other gets an access token. A
 * purchase token answers what `purchases` holds for it (404 when nothing);
 * `hang` and `drop` stall or cut the connection.
 */

export interface FakeAnswer {
  status?: number;
  /** JSON-encoded unless a string. */
  body?: unknown;
}

export interface ServiceAccountJson {
  type: 'service_account';
  client_email: string;
  private_key: string;
  private_key_id: string;
}

export class FakeGooglePlay {
  readonly purchases = new Map<string, FakeAnswer>();
  /** Token exchanges that were answered with a token. */
  tokensIssued = 0;
  /** Purchase reads, with the path they asked for. */
  readonly reads: { path: string; authorization: string | undefined }[] = [];
  readonly #publicKeys = new Map<string, string>();
  readonly #issued = new Set<string>();
  readonly #stalled: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly base: string,
  ) {}

  static async start(): Promise<FakeGooglePlay> {
    let fake!: FakeGooglePlay;
    const server = createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    fake = new FakeGooglePlay(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return fake;
  }

  get tokenUrl(): string {
    return `${this.base}/token`;
  }

  /** A fresh RSA service account this fake knows the public key of. */
  serviceAccount(localPart = 'svc-test'): ServiceAccountJson {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const email = `${localPart}@svc-test.iam.gserviceaccount.example`;
    this.#publicKeys.set(email, publicKey.export({ type: 'spki', format: 'pem' }).toString());
    return { type: 'service_account', client_email: email, private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), private_key_id: `kid-${localPart}` };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.base);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    if (url.pathname === '/token' && req.method === 'POST') {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return send(400, { error: 'unsupported_grant_type' });
      const email = await this.#verifyAssertion(form.get('assertion') ?? '');
      if (!email) return send(400, { error: 'invalid_grant' });
      const who = email.split('@')[0];
      if (who === 'refused') return send(400, { error: 'invalid_grant' });
      if (who === 'hangs') return void this.#stalled.push(res);
      if (who === 'garbled') return send(200, '<html>');
      const token = `access-${++this.tokensIssued}`;
      this.#issued.add(token);
      return send(200, { access_token: token, expires_in: 3600, token_type: 'Bearer' });
    }
    const read = /^\/androidpublisher\/v3\/applications\/[^/]+\/purchases\/products\/[^/]+\/tokens\/([^/]+)$/.exec(url.pathname);
    if (read && req.method === 'GET') {
      const authorization = req.headers.authorization;
      this.reads.push({ path: url.pathname, authorization });
      if (!authorization || !this.#issued.has(authorization.replace(/^Bearer /, ''))) return send(401, { error: { code: 401 } });
      const purchaseToken = decodeURIComponent(read[1]!);
      if (purchaseToken === 'hang') return void this.#stalled.push(res);
      if (purchaseToken === 'drop') return void req.socket.destroy();
      const answer = this.purchases.get(purchaseToken);
      if (!answer) return send(404, { error: { code: 404, message: 'The purchase token was not found.' } });
      return send(answer.status ?? 200, answer.body ?? {});
    }
    send(404, { error: 'no such endpoint' });
  }

  /** The signing account's email when the assertion is one it made for this token endpoint with the publisher scope. */
  async #verifyAssertion(assertion: string): Promise<string | null> {
    try {
      const [, body] = assertion.split('.');
      const claimed = JSON.parse(Buffer.from(body ?? '', 'base64url').toString('utf8')) as { iss?: string };
      const pem = claimed.iss ? this.#publicKeys.get(claimed.iss) : undefined;
      if (!pem) return null;
      const { payload } = await jwtVerify(assertion, await importSPKI(pem, 'RS256'), { issuer: claimed.iss!, audience: this.tokenUrl, algorithms: ['RS256'], requiredClaims: ['iat', 'exp'] });
      return payload.scope === 'https://www.googleapis.com/auth/androidpublisher' ? claimed.iss! : null;
    } catch {
      return null;
    }
  }

  async close(): Promise<void> {
    for (const res of this.#stalled) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

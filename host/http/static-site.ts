import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { errorResponse } from '../../handlers/http';
import { HSTS } from '../../handlers/pipeline/security-headers';
import { ApiError, type ErrorCode } from '../../runtime/contracts/errors';

export interface StaticSiteOptions {
  /** Path the site lives under, without a trailing slash (`/console`). */
  prefix: string;
  /** A built directory (esbuild output under dist/) holding `index.html` and its assets. */
  dir: string;
  /** Paths under the prefix that belong to the API, never to the site (`/console/session`). */
  passThrough?: string[];
  /** Error codes of a missing asset and of a directory that was never built. */
  codes?: { notFound?: ErrorCode; notBuilt?: ErrorCode };
}

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** esbuild's `[name]-[hash]` names: a hash of eight or more base32 characters before the extension. */
const HASHED = /-[A-Z0-9]{8,}(\.[a-z0-9]+)+$/;

/**
 * The app loads only its own hashed script and stylesheet, talks only to this
 * origin (REST and WebSocket), and may never be framed.
 */
const SITE_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
};

/**
 * A built single-page app served by the Node host under a path prefix (the
 * embeddable handler library never serves files). Files are read once into
 * memory, so a request never touches the disk and no path a client sends is
 * ever joined onto a directory: only names the build produced can be served.
 */
export class StaticSite {
  readonly prefix: string;
  readonly #dir: string;
  readonly #passThrough: Set<string>;
  readonly #notFound: ErrorCode;
  readonly #notBuilt: ErrorCode;
  #assets: Map<string, Asset> | null = null;

  constructor(options: StaticSiteOptions) {
    if (!/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(options.prefix) || /\/\.\.?(\/|$)/.test(options.prefix)) throw new Error(`static site prefix '${options.prefix}' must be a plain path without a trailing slash`);
    this.prefix = options.prefix;
    this.#dir = options.dir;
    this.#passThrough = new Set(options.passThrough ?? []);
    this.#notFound = options.codes?.notFound ?? 'not_found';
    this.#notBuilt = options.codes?.notBuilt ?? 'not_ready';
  }

  /** true when it answered; `secure` is the adapter's own decision (the socket, or a trusted proxy's word). */
  serve(req: IncomingMessage, res: ServerResponse, secure: boolean): boolean {
    const target = req.url ?? '';
    // Every API request passes here first: refuse it before any parsing.
    if (!target.startsWith(this.prefix)) return false;
    const queryAt = target.search(/[?#]/);
    const pathname = queryAt === -1 ? target : target.slice(0, queryAt);
    if (pathname !== this.prefix && !pathname.startsWith(this.prefix + '/')) return false;
    if (this.#passThrough.has(pathname)) return false;
    // Other methods fall through to the API, which answers them as it answers any unknown path.
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;

    const assets = this.#load();
    const index = assets?.get('index.html');
    if (!assets || !index) {
      this.#refuse(res, new ApiError(this.#notBuilt, `${this.prefix} has not been built (run npm run build).`), secure, req.method === 'HEAD');
      return true;
    }
    const rest = pathname.slice(this.prefix.length + 1);
    if (refusedPath(rest)) {
      this.#refuse(res, new ApiError(this.#notFound), secure, req.method === 'HEAD');
      return true;
    }
    const asset = rest === '' ? index : assets.get(rest);
    if (asset) {
      this.#send(req, res, asset, secure);
      return true;
    }
    // A name with an extension is a missing file; anything else is one of the app's own routes.
    if (/\.[A-Za-z0-9]+$/.test(rest)) {
      this.#refuse(res, new ApiError(this.#notFound), secure, req.method === 'HEAD');
      return true;
    }
    this.#send(req, res, index, secure);
    return true;
  }

  #send(req: IncomingMessage, res: ServerResponse, asset: Asset, secure: boolean): void {
    const headers: Record<string, string> = {
      ...SITE_HEADERS,
      'content-type': asset.type,
      'cache-control': asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      etag: asset.etag,
    };
    if (secure) headers['strict-transport-security'] = HSTS;
    if (req.headers['if-none-match'] === asset.etag) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    headers['content-length'] = String(asset.body.byteLength);
    res.writeHead(200, headers);
    res.end(req.method === 'HEAD' ? undefined : asset.body);
  }

  /** The API's own error answer, so a refusal here looks like any other. */
  #refuse(res: ServerResponse, err: ApiError, secure: boolean, head: boolean): void {
    const reply = errorResponse(err);
    if (secure) reply.headers['strict-transport-security'] = HSTS;
    reply.headers['content-length'] = String(Buffer.byteLength(reply.body));
    res.writeHead(reply.status, reply.headers);
    res.end(head ? undefined : reply.body);
  }

  /** The built files, read on first use; a directory not built yet is looked at again on the next request. */
  #load(): Map<string, Asset> | null {
    if (this.#assets) return this.#assets;
    let names: string[];
    try {
      names = readdirSync(this.#dir, { recursive: true, encoding: 'utf8' });
    } catch {
      return null;
    }
    const assets = new Map<string, Asset>();
    for (const name of names) {
      const file = path.join(this.#dir, name);
      if (!statSync(file).isFile()) continue;
      const key = name.split(path.sep).join('/');
      const body = readFileSync(file);
      const type = TYPES[path.extname(key).toLowerCase()] ?? 'application/octet-stream';
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
      assets.set(key, { body, type, etag, immutable: key !== 'index.html' && HASHED.test(key) });
    }
    if (!assets.has('index.html')) return null;
    this.#assets = assets;
    return assets;
  }
}

/**
 * Traversal and its encoded spellings, backslashes, empty segments and
 * control characters: never a file and never an app route either.
 */
function refusedPath(rest: string): boolean {
  if (/[\\\x00-\x1f\x7f]/.test(rest)) return true;
  if (/%(2e|2f|5c|00)/i.test(rest)) return true;
  const segments = rest.split('/');
  return segments.some((s, i) => s === '.' || s === '..' || (s === '' && i < segments.length - 1));
}

/**
 * Where a browser app's build lives: beside the bundled host (dist/host.mjs
 * runs from dist/), or under dist/ of the checkout when the host runs from
 * its sources (tests).
 */
export function builtDir(name: string): string {
  const here = fileURLToPath(import.meta.url);
  const dist = here.endsWith('.ts') ? path.resolve(path.dirname(here), '..', '..', 'dist') : path.dirname(here);
  return path.join(dist, name);
}

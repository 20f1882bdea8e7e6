import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { App, RequestMeta } from '../../handlers/app';
import { MAX_BODY_BYTES } from '../../handlers/body';
import { errorResponse, type ApiResponse, type HeaderReader, type RequestLike } from '../../handlers/http';
import { HSTS } from '../../handlers/pipeline/security-headers';
import { ApiError } from '../../runtime/contracts/errors';
import type { IdSource } from '../../runtime/platform/ids';
import type { StaticSite } from './static-site';
import { forwardedFor, type TrustedProxies } from '../infra/client-address';

/**
 * The `node:http` adapter of the handler library. It enforces the body rules before a byte
 * of an oversized or length-less body is buffered: a declared length over the
 * cap is answered 413 at once, a body without Content-Length 411, and a body
 * that outgrows its declared length is cut off at the cap.
 */
export interface AdapterOptions {
  app: App;
  ids: IdSource;
  proxies: TrustedProxies;
  /** Told of the body-rule refusals answered here, which never reach the app (no route matched). */
  refused?: (method: string, status: number, arrived: number) => void;
  /** Built browser apps the Node host serves (the console, /play); asked before the API routes. */
  sites?: StaticSite[];
}

export function nodeHandler(options: AdapterOptions) {
  const { app, ids, proxies, refused } = options;
  const sites = options.sites ?? [];
  const refuse = (req: IncomingMessage, res: ServerResponse, err: ApiError, requestId: string, arrived: number, secure: boolean): void => {
    refuseBody(req, res, err, requestId, secure);
    refused?.(req.method ?? 'GET', err.status, arrived);
  };
  // Not async: a request without a body whose pipeline answered at once is written at once, without a promise.
  return (req: IncomingMessage, res: ServerResponse): void | Promise<void> => {
    const peer = req.socket.remoteAddress ?? '';
    const trusted = proxies.trusts(peer);
    const secure = Boolean((req.socket as { encrypted?: boolean }).encrypted) || (trusted && req.headers['x-forwarded-proto'] === 'https');
    // The sites take the API's answer to "over TLS?" (their HSTS), so a proxy is trusted the same way for both.
    for (const site of sites) if (site.serve(req, res, secure)) return;
    const arrived = performance.now();
    const requestId = ids.uuid();
    const ip = trusted ? forwardedFor(req, proxies) ?? peer : peer;

    const declared = req.headers['content-length'];
    const chunked = req.headers['transfer-encoding'] !== undefined;
    if (declared === undefined && chunked) return refuse(req, res, new ApiError('length_required'), requestId, arrived, secure);
    const length = declared === undefined ? 0 : Number(declared);
    if (!Number.isSafeInteger(length) || length < 0) return refuse(req, res, new ApiError('length_required'), requestId, arrived, secure);
    if (length > MAX_BODY_BYTES) return refuse(req, res, new ApiError('payload_too_large', undefined, { limit: MAX_BODY_BYTES }), requestId, arrived, secure);
    const meta: RequestMeta = { ip, requestId, secure, arrived };
    if (length === 0) return respond(app, req, res, null, meta);
    return readBody(req, length).then((body) => {
      if (body === null) return refuse(req, res, new ApiError('payload_too_large', undefined, { limit: MAX_BODY_BYTES }), requestId, arrived, secure);
      return respond(app, req, res, body, meta);
    });
  };
}

/** Hands the request to the app and writes its answer, at once when the app answered at once. */
function respond(app: App, req: IncomingMessage, res: ServerResponse, body: Buffer | null, meta: RequestMeta): void | Promise<void> {
  // Routing reads only the path and query, and the Host header is the client's to choose: a
  // fixed authority keeps a malformed one (`[::1`, `a b`, `a/b`) from failing the URL parse
  // (500) or shifting the path. A target that is not a path (`*`, absolute-form) routes nowhere.
  const target = req.url?.startsWith('/') ? req.url : '/';
  const url = `${meta.secure ? 'https' : 'http'}://localhost${target}`;
  const request: RequestLike = { method: req.method ?? 'GET', url, headers: new NodeHeaders(req.headers), body: null, bufferedBody: body };
  const reply = app.handle(request, meta);
  if (reply instanceof Promise) return reply.then((answered) => write(res, answered));
  write(res, reply);
}

/** Writes an answer: a flat [name, value, ...] list is node's cheapest header form; headers and a string body then go out in one write. */
function write(res: ServerResponse, reply: ApiResponse): void {
  const flat: string[] = [];
  for (const name in reply.headers) {
    const value = reply.headers[name]!;
    if (Array.isArray(value)) for (const v of value) flat.push(name, v);
    else flat.push(name, value);
  }
  flat.push('content-length', String(Buffer.byteLength(reply.body)));
  res.writeHead(reply.status, flat);
  res.end(reply.body);
}

/** fetch-style read access over node's already-parsed, lower-cased header object. */
class NodeHeaders implements HeaderReader {
  constructor(private readonly raw: IncomingHttpHeaders) {}

  get(name: string): string | null {
    // Callers nearly always pass the lower-case name already; node stores that form.
    const value = this.raw[name] ?? this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(name.toLowerCase() === 'cookie' ? '; ' : ', ') : value;
  }

  has(name: string): boolean {
    return (this.raw[name] ?? this.raw[name.toLowerCase()]) !== undefined;
  }

  forEach(callback: (value: string, name: string) => void): void {
    for (const name of Object.keys(this.raw)) callback(this.get(name)!, name);
  }
}

/**
 * After a refused body, how much more of it the node reads (and discards) and
 * for how long, before it gives up on the client and drops the connection.
 */
const DRAIN_BYTES = 8 * MAX_BODY_BYTES;
const DRAIN_MS = 10_000;

/**
 * Answers a body-rule failure without buffering the body, then closes the
 * connection once the client has finished sending. Closing while the upload
 * is still arriving makes the kernel reset the connection, and a reset can
 * destroy the answer in the client's buffers before it reads it: the client
 * would see a broken pipe instead of the 413. So the rest of the body is read
 * and discarded, within bounds, and the close is a graceful one.
 */
function refuseBody(req: IncomingMessage, res: ServerResponse, err: ApiError, requestId: string, secure: boolean): void {
  const socket = req.socket;
  let drained = 0;
  const giveUp = () => socket.destroy();
  const timer = setTimeout(giveUp, DRAIN_MS);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    drained += chunk.byteLength;
    if (drained > DRAIN_BYTES) giveUp();
  });
  req.on('end', () => {
    clearTimeout(timer);
    // Once the answer is out: a FIN after everything the client sent was read.
    if (res.writableFinished) socket.end();
    else res.once('finish', () => socket.end());
  });
  socket.once('close', () => clearTimeout(timer));
  req.resume();
  // The API's own error answer with what the pipeline's last step adds (the request id, HSTS
  // over TLS), since the request never reaches the app. It says `connection: close`, which is
  // true: a client must not send its next request on this connection. Node, told so, would
  // destroy the socket once the answer is written, body still arriving (the reset above); the
  // FIN after the drain closes it instead.
  socket.destroySoon = () => {};
  const reply = errorResponse(err);
  reply.headers.connection = 'close';
  reply.headers['x-request-id'] = requestId;
  if (secure) reply.headers['strict-transport-security'] = HSTS;
  reply.headers['content-length'] = String(Buffer.byteLength(reply.body));
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

/** Reads exactly the declared length; null if the peer sends more than the cap. */
function readBody(req: IncomingMessage, declared: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      total += chunk.byteLength;
      if (total > MAX_BODY_BYTES || total > declared) {
        done = true;
        req.pause();
        resolve(null);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!done) resolve(Buffer.concat(chunks, total));
    });
    req.on('error', (err) => {
      if (!done) reject(err);
    });
  });
}

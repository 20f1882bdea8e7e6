import { z } from 'zod';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { bytesToBase64Url, constantTimeEqual, randomBytes, sha256Hex } from '../platform/crypto';
import { CAPABILITIES, type Capability } from '../contracts/capabilities';
import type { ConsoleSession, ConsoleSessionStore } from '../contracts/services';
import { authenticateOperator, OPERATOR_LABEL_MAX, operatorLabel, type Operator } from './operators';

/**
 * Browser sessions of the operator console (12 hours, node-local, gone when the node restarts). A session is
 * opened with the operator secret and then travels as two cookies: the
 * HttpOnly session id, and a readable CSRF token the console echoes in
 * `x-csrf-token`, which a cross-site page can neither read nor forge.
 *
 * Sessions live in this node's memory only: they resolve on the node that
 * minted them and end when it restarts, which is the point (no console
 * credential outlives the process, and nothing of it is ever stored).
 */

export const SESSION_COOKIE = 'svc_console';
export const CSRF_COOKIE = 'svc_console_csrf';
export const CSRF_HEADER = 'x-csrf-token';
/** Absolute lifetime; reads never extend it. */
export const CONSOLE_SESSION_TTL_MS = 12 * 3600 * 1000;
/** Sessions a node holds at most; the oldest goes first (each one took the secret to make). */
const MAX_SESSIONS = 1000;

/** The node's console sessions, keyed by the SHA-256 of the cookie value. */
export class ConsoleSessions implements ConsoleSessionStore {
  readonly #sessions = new Map<string, ConsoleSession>();

  async open(display: string, now: number, newId: () => string): Promise<{ cookie: string; session: ConsoleSession }> {
    this.#sweep(now);
    while (this.#sessions.size >= MAX_SESSIONS) this.#sessions.delete(this.#sessions.keys().next().value!);
    const cookie = bytesToBase64Url(randomBytes(32));
    const session: ConsoleSession = { id: newId(), csrf: bytesToBase64Url(randomBytes(32)), display, expiresAt: now + CONSOLE_SESSION_TTL_MS };
    this.#sessions.set(await sha256Hex(cookie), session);
    return { cookie, session };
  }

  /** The live session a cookie names, or null (unknown, ended, expired). */
  async find(cookie: string | null, now: number): Promise<ConsoleSession | null> {
    if (!cookie) return null;
    const key = await sha256Hex(cookie);
    const session = this.#sessions.get(key);
    if (!session) return null;
    if (session.expiresAt <= now) {
      this.#sessions.delete(key);
      return null;
    }
    return session;
  }

  async end(cookie: string | null): Promise<void> {
    if (cookie) this.#sessions.delete(await sha256Hex(cookie));
  }

  #sweep(now: number): void {
    for (const [key, s] of this.#sessions) if (s.expiresAt <= now) this.#sessions.delete(key);
  }
}

/** What a console session holds: every class but `erasure`, which only `console_erasure` adds. */
export function consoleCapabilities(ctx: Ctx): Capability[] {
  return CAPABILITIES.filter((c) => c !== 'erasure' || ctx.settings.console_erasure);
}

/** One cookie's value out of a `Cookie` header. */
export function cookieValue(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at < 0 || part.slice(0, at).trim() !== name) continue;
    const value = part.slice(at + 1).trim();
    return value === '' ? null : value;
  }
  return null;
}

function sameText(a: string, b: string): boolean {
  const enc = new TextEncoder();
  return constantTimeEqual(enc.encode(a), enc.encode(b));
}

/** The store, or the same 404 an unknown path answers while the console is off (or the host keeps no sessions). */
function sessionsOf(ctx: Ctx, method: string, path: string): ConsoleSessionStore {
  if (!ctx.settings.console || !ctx.consoleSessions) throw new ApiError('not_found', `No route for ${method} ${path}.`);
  return ctx.consoleSessions;
}

export const ConsoleSignIn = z
  .object({
    secret: z.string().min(1).max(1024),
    label: z
      .string()
      .max(OPERATOR_LABEL_MAX)
      .refine((v) => operatorLabel(v) !== null, `must be 1-${OPERATOR_LABEL_MAX} printable ASCII characters without a comma`)
      .optional(),
  })
  .strict();

export interface CookieRequest {
  cookie: string | null;
  csrf: string | null;
  secure: boolean;
}

/** Both cookies for a new session, or expired ones that end it. */
function setCookies(session: { cookie: string; csrf: string } | null, secure: boolean): string[] {
  const tail = `; Path=/; SameSite=Lax${secure ? '; Secure' : ''}`;
  if (!session) return [`${SESSION_COOKIE}=; Max-Age=0; HttpOnly${tail}`, `${CSRF_COOKIE}=; Max-Age=0${tail}`];
  const age = `; Max-Age=${CONSOLE_SESSION_TTL_MS / 1000}`;
  return [`${SESSION_COOKIE}=${session.cookie}${age}; HttpOnly${tail}`, `${CSRF_COOKIE}=${session.csrf}${age}${tail}`];
}

/** The headers that say where a sign-in comes from. */
export interface SignInOrigin {
  contentType: string | null;
  origin: string | null;
  fetchSite: string | null;
  host: string | null;
}

/**
 * Why a sign-in looks like another site's page posting to us, or null. A
 * cross-site form or `fetch` in no-cors mode can send `text/plain` without a
 * preflight and would plant a session cookie of the attacker's choosing (login
 * CSRF); JSON needs a preflight, which only configured origins pass. Browsers
 * say where a request comes from in `Sec-Fetch-Site`, which a page cannot set;
 * without it, `Origin` must name this host. Tools that send neither (curl, the
 * ops CLI) are not browsers and pass.
 */
function crossSiteRefusal(from: SignInOrigin, secure: boolean): 'not_json' | 'cross_site' | null {
  const mediaType = from.contentType?.split(';')[0]!.trim().toLowerCase();
  if (mediaType !== 'application/json') return 'not_json';
  if (from.fetchSite !== null) return from.fetchSite === 'same-origin' || from.fetchSite === 'none' ? null : 'cross_site';
  if (from.origin === null) return null;
  return from.host !== null && from.origin === `${secure ? 'https' : 'http'}://${from.host}` ? null : 'cross_site';
}

/**
 * Opens a session for whoever presents the operator secret itself (a minted
 * token will not do: a session would outlive its short expiry).
 */
export async function openConsoleSession(ctx: Ctx, input: z.output<typeof ConsoleSignIn>, from: SignInOrigin, secure: boolean) {
  const sessions = sessionsOf(ctx, 'POST', '/console/session');
  const refusal = crossSiteRefusal(from, secure);
  if (refusal) {
    ctx.log.info('console_sign_in_refused', { reason: refusal });
    throw new ApiError('forbidden', 'The console signs in from its own pages only: a JSON body, from this origin.');
  }
  const now = ctx.clock.now();
  const operator = await authenticateOperator(ctx.settings.ops_secret, input.secret, null, now);
  if (!operator || operator.source !== 'ops_secret') {
    ctx.log.info('console_sign_in_refused', { reason: ctx.settings.ops_secret ? 'bad_secret' : 'no_secret' });
    throw new ApiError('forbidden');
  }
  const display = input.label ?? 'operator';
  const { cookie, session } = await sessions.open(display, now, () => ctx.ids.uuid());
  ctx.log.info('console_session_opened', { session: session.id, display });
  return {
    body: { data: { display, expires_at: Math.floor(session.expiresAt / 1000), csrf: session.csrf } },
    cookies: setCookies({ cookie, csrf: session.csrf }, secure),
  };
}

/** Who this browser is: needs the session cookie and its CSRF token in the header. */
export async function readConsoleSession(ctx: Ctx, request: CookieRequest) {
  const operator = await consoleOperator(ctx, sessionsOf(ctx, 'GET', '/console/session'), request);
  return { data: { display: operator.actor.display, source: 'console' as const, caps: [...operator.caps], attested: false } };
}

export async function endConsoleSession(ctx: Ctx, request: CookieRequest) {
  await sessionsOf(ctx, 'DELETE', '/console/session').end(request.cookie);
  return { body: { success: true as const }, cookies: setCookies(null, request.secure) };
}

/**
 * The operator a console cookie stands for. No live session is 401 (the
 * console shows its sign-in form); a live one without the matching CSRF
 * header is 403, as a forged cross-site request would be.
 */
async function consoleOperator(ctx: Ctx, sessions: ConsoleSessionStore, request: CookieRequest): Promise<Operator> {
  const session = await sessions.find(request.cookie, ctx.clock.now());
  if (!session) throw new ApiError('unauthenticated');
  if (!request.csrf || !sameText(request.csrf, session.csrf)) throw new ApiError('forbidden');
  return operatorOf(ctx, session);
}

function operatorOf(ctx: Ctx, session: ConsoleSession): Operator {
  return {
    source: 'console',
    caps: new Set(consoleCapabilities(ctx)),
    actor: { id: `console:${session.id}`, display: session.display, source: 'console', attested: false },
  };
}

/**
 * On the ops plane, for a request without a bearer: the console session its
 * cookie names, only with the matching CSRF header; null otherwise (the
 * caller answers the plane's one 403).
 */
export async function consoleOperatorFor(ctx: Ctx, request: CookieRequest): Promise<Operator | null> {
  if (!ctx.settings.console || !ctx.consoleSessions || !request.cookie) return null;
  const session = await ctx.consoleSessions.find(request.cookie, ctx.clock.now());
  if (!session || !request.csrf || !sameText(request.csrf, session.csrf)) return null;
  return operatorOf(ctx, session);
}

import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { ClientGateInput, ClientGateVerdict } from '../contracts/services';

/**
 * The client gate: an operator-supplied function that vets
 * pre-auth traffic on `/auth/register`, `/auth/oauth` and `/auth/guest`
 * after the rate limiter and before any password hash or provider call.
 *
 * Contract of the operator's module: its default export is
 *
 *   async (input: ClientGateInput) => ClientGateVerdict   (both in contracts/services.ts)
 *
 * `{action: 'skip'}` (or `'allow'`) lets the request through;
 * `{action: 'deny', reason}` answers 403 `client_gate_denied` with
 * `details.reason`. A throw, a hang past `client_gate_timeout` or any other
 * answer fails closed (reason `client_gate_unavailable`) unless
 * `client_gate_on_error` is `skip`.
 */

/** The part of a request the gate sees: its path and headers (any host's request shape has these). */
export interface GatedRequest {
  readonly url: string;
  readonly headers: { forEach(callback: (value: string, name: string) => void): void };
}

export const GATE_UNAVAILABLE = 'client_gate_unavailable';
const MAX_REASON_LENGTH = 256;
const WITHHELD_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);

/**
 * The one call every gated route makes. Resolves when the request may go on;
 * throws 403 `client_gate_denied` otherwise.
 */
export async function passClientGate(
  ctx: Pick<Ctx, 'clientGate' | 'settings' | 'log'>,
  request: GatedRequest,
  ip: string,
  token?: string,
): Promise<void> {
  const gate = ctx.clientGate;
  if (!gate) return;
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    if (!WITHHELD_HEADERS.has(name)) headers[name] = value;
  });
  const input: ClientGateInput = { ip, headers, path: new URL(request.url).pathname, ...(token !== undefined ? { token } : {}) };

  let verdict: ClientGateVerdict | null;
  try {
    verdict = readVerdict(await withTimeout(Promise.resolve().then(() => gate(input)), ctx.settings.client_gate_timeout));
    if (!verdict) ctx.log.warn('client_gate_malformed', { path: input.path });
  } catch (err) {
    ctx.log.warn('client_gate_failed', { path: input.path, error: err instanceof Error ? err.message : String(err) });
    verdict = null;
  }
  if (!verdict) {
    if (ctx.settings.client_gate_on_error === 'skip') return;
    throw new ApiError('client_gate_denied', 'The request was refused.', { reason: GATE_UNAVAILABLE });
  }
  if (verdict.action === 'deny') throw new ApiError('client_gate_denied', 'The request was refused.', { reason: verdict.reason });
}

function readVerdict(value: unknown): ClientGateVerdict | null {
  if (typeof value !== 'object' || value === null) return null;
  const { action, reason } = value as { action?: unknown; reason?: unknown };
  if (action === 'allow' || action === 'skip') return { action };
  if (action === 'deny' && typeof reason === 'string' && reason.length > 0 && reason.length <= MAX_REASON_LENGTH) {
    return { action, reason };
  }
  return null;
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`client gate timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

import { databaseFault, databaseFaultError } from '../../runtime/platform/database';
import type { Ctx } from '../../runtime/contracts/context';
import type { RpcDispatcher } from '../../runtime/contracts/live';
import { ApiError, ERROR_STATUS, type ErrorCode } from '../../runtime/contracts/errors';
import { isPlainObject, rpcErrorFrame, type ClientFrame } from '../../runtime/contracts/frame-envelope';
import { rpcParams, type rpcCall } from '../../runtime/schemas/rpc';
import type { Session } from './sessions';
import type { FrameHandler, Reply } from './gateway';

/** What a method handler learns about its call. */
export interface RpcCall {
  playerId: string;
  /** The method called; for a mounted namespace, the part after `<namespace>.`. */
  method: string;
  /** The socket the call came on; null over HTTP (`POST /api/v1/rpc`). */
  session: Session | null;
}

/** Returns the result object (or nothing for `{}`); throws `ApiError` with a declared code to fail. */
export type RpcHandler = (params: Record<string, unknown>, call: RpcCall) => unknown;

export interface RpcMethodOptions {
  /**
   * Domain codes this method may answer with. When given, any other code the
   * handler throws is answered `internal`; when absent every `ApiError` passes.
   */
  codes?: ErrorCode[];
}

const METHOD_NAME = /^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64})+$/;

/**
 * The `rpc.call` method registry. Extensions register
 * `<extension>.<name>` methods at boot; the dispatcher runs the checks in the
 * protocol's order and turns every failure into an `rpc.error`, never an
 * `error` frame.
 */
export class RpcRegistry implements RpcDispatcher {
  readonly #methods = new Map<string, { handler: RpcHandler; codes: Set<ErrorCode> | null }>();
  readonly #mounts = new Map<string, RpcHandler>();

  constructor(
    private readonly ctx: Ctx,
    /** The datagram plane's mint and its revocation (host/realtime/datagram/plane.ts), when the plane is on. */
    datagrams: { open: RpcHandler; close: RpcHandler } | null = null,
  ) {
    // Without a datagram plane these answer as asobi does when its plane is off.
    const unavailable = () => {
      throw new ApiError('datagram_unavailable', 'The datagram plane is not available on this server.');
    };
    this.register('asobi.datagram.open', datagrams?.open ?? unavailable, { codes: ['datagram_unavailable'] });
    this.register('asobi.datagram.close', datagrams?.close ?? unavailable, { codes: ['datagram_unavailable', 'rpc.invalid_params'] });
  }

  /**
   * Hands every `<namespace>.<name>` method to one provider whose set of
   * methods may change at run time (the game script's `rpc` table). The
   * provider throws `rpc.unknown_method` for a name it does not serve.
   */
  mount(namespace: string, provider: RpcHandler): void {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(namespace)) throw new Error(`rpc namespace must be 1-64 of A-Z a-z 0-9 _ -: ${namespace}`);
    if (this.#mounts.has(namespace)) throw new Error(`rpc namespace ${namespace} already mounted`);
    for (const method of this.#methods.keys()) if (method.startsWith(namespace + '.')) throw new Error(`rpc method ${method} is inside namespace ${namespace}`);
    this.#mounts.set(namespace, provider);
  }

  register(method: string, handler: RpcHandler, options: RpcMethodOptions = {}): void {
    if (!METHOD_NAME.test(method)) throw new Error(`rpc method name must be <extension>.<name>: ${method}`);
    if (this.#methods.has(method)) throw new Error(`rpc method ${method} already registered`);
    if (this.#mounts.has(method.slice(0, method.indexOf('.')))) throw new Error(`rpc method ${method} is inside a mounted namespace`);
    this.#methods.set(method, { handler, codes: options.codes ? new Set(options.codes) : null });
  }

  async call(method: string, params: Record<string, unknown>, caller: { playerId: string; session?: Session }): Promise<Record<string, unknown>> {
    const entry = this.#methods.get(method) ?? this.#mounted(method);
    if (!entry) throw new ApiError('rpc.unknown_method', 'No extension serves that method.');
    let result: unknown;
    try {
      result = await entry.handler(params, { playerId: caller.playerId, method, session: caller.session ?? null });
    } catch (err) {
      const declared = declaredFailure(err);
      if (declared && (entry.codes === null || entry.codes.has(declared.code))) throw declared;
      const fault = databaseFault(err);
      if (fault) throw databaseFaultError(fault);
      this.ctx.log.error('rpc_handler_failed', { method, player_id: caller.playerId, error: err });
      throw new ApiError('internal');
    }
    if (result === undefined || result === null) return {};
    if (!isPlainObject(result)) {
      this.ctx.log.error('rpc_result_not_object', { method });
      throw new ApiError('internal');
    }
    try {
      // A result that cannot be encoded must fail here, not in the socket write.
      return JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
    } catch (err) {
      this.ctx.log.error('rpc_result_not_encodable', { method, error: err });
      throw new ApiError('internal');
    }
  }

  #mounted(method: string): { handler: RpcHandler; codes: null } | undefined {
    const dot = method.indexOf('.');
    const provider = dot > 0 ? this.#mounts.get(method.slice(0, dot)) : undefined;
    return provider && { handler: (params, call) => provider(params, { ...call, method: method.slice(dot + 1) }), codes: null };
  }

  /** Serves `rpc.call` on the gateway; the socket's player is the caller. */
  /** `rpc.call` (the frame table, frame-table.ts, routes it here). */
  readonly callFrame: FrameHandler<typeof rpcCall> = (session, payload, frame) => this.#frame(session, payload, frame);

  /** The checks in the protocol's order, each failure an `rpc.error` (the contract takes the payload as sent). */
  async #frame(session: Session, payload: unknown, frame: ClientFrame): Promise<Reply> {
    const fail = (err: ApiError, echo = true): Reply => {
      const f = rpcErrorFrame(null, err);
      return { type: f.type, payload: f.payload, echoCid: echo };
    };
    if (!validCid(frame.cid)) return fail(new ApiError('rpc.invalid_cid', 'An rpc.call needs a cid of 1-64 printable ASCII bytes.'), false);
    if (session.playerId === null) return fail(new ApiError('unauthenticated'));
    if (!this.ctx.readiness.ready()) return fail(new ApiError('not_ready'));
    if (!isPlainObject(payload)) return fail(new ApiError('invalid_payload'));
    if (payload.protocol !== 1) return fail(new ApiError('rpc.unsupported_protocol', 'Only protocol 1 is supported.', { supported: [1] }));
    if (typeof payload.method !== 'string') return fail(new ApiError('rpc.unknown_method', 'No extension serves that method.'));
    try {
      const result = await this.call(payload.method, rpcParams(payload.params), { playerId: session.playerId, session });
      return { type: 'rpc.ok', payload: { result } };
    } catch (err) {
      return fail(err instanceof ApiError ? err : new ApiError('internal'));
    }
  }
}

/**
 * A handler's failure as an `ApiError`, or null for anything else. An
 * extension bundled on its own carries its own copy of the `ApiError` class,
 * so a failure is recognised by its code from the closed set, not its class.
 */
function declaredFailure(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  if (typeof err !== 'object' || err === null) return null;
  const { code, message, details } = err as { code?: unknown; message?: unknown; details?: unknown };
  if (typeof code !== 'string' || !Object.hasOwn(ERROR_STATUS, code)) return null;
  return new ApiError(code as ErrorCode, typeof message === 'string' ? message : undefined, isPlainObject(details) ? (details as Record<string, unknown>) : {});
}

/** An `rpc.call` cid: a string of 1-64 bytes, each 0x20-0x7E (any other answers `rpc.invalid_cid` without a cid). */
function validCid(cid: unknown): cid is string {
  return typeof cid === 'string' && /^[\x20-\x7e]{1,64}$/.test(cid);
}

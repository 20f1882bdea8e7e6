import { z } from 'zod';
import { ApiError } from '../contracts/errors';
import { ErrorObject, JsonObject } from './common';
import { clientFrame } from './frame-contract';

/**
 * RPC on the wire: `rpc.call` on the socket and `POST /rpc/:method`. Every
 * failure of a call is an answer in the RPC envelope (`rpc.error`), never the
 * transport's own error, so the call's input is checked by the dispatcher in
 * the protocol's order rather than by the transport ahead of it.
 */

/** A method's arguments: any JSON object; each method checks its own. */
export const RpcParams = JsonObject.meta({ description: 'the method\'s arguments' });

/** The params of a call on either transport, or `rpc.invalid_params`. */
export function rpcParams(value: unknown): z.output<typeof RpcParams> {
  const parsed = RpcParams.safeParse(value);
  if (!parsed.success) throw new ApiError('rpc.invalid_params', 'params must be an object.');
  return parsed.data;
}

export const RpcOk = z.object({ result: JsonObject.meta({ description: 'what the method answered; `{}` when it answered nothing' }) });

export const RpcError = z.object({ error: ErrorObject.shape.error });

/**
 * `POST /rpc/:method`. `params` is declared loosely because a missing or
 * malformed one answers `rpc.invalid_params` inside the RPC envelope, not
 * the plain error object a rejected body would.
 */
export const RpcHttpCall = z.object({
  params: z.unknown().optional().meta({ description: 'the method\'s arguments, a JSON object; anything else, or none, answers `rpc.invalid_params`' }),
});

/** Success and failure alike are `{type, payload}`; a failure repeats its error object at the top level and answers with the error's status. */
export const RpcHttpAnswer = z.union([
  z.object({ type: z.literal('rpc.ok'), payload: RpcOk }),
  RpcError.extend({ type: z.literal('rpc.error'), payload: RpcError }),
]);

/**
 * `rpc.call`. The payload is taken as sent and checked by the dispatcher:
 * the `cid` comes first (a string of 1-64 printable ASCII bytes, else
 * `rpc.invalid_cid` answered without one), then the session, readiness, an
 * object payload (`invalid_payload`), `protocol: 1`
 * (`rpc.unsupported_protocol`), a string `method` (`rpc.unknown_method`) and
 * an object `params` (`rpc.invalid_params`), each failure as `rpc.error`.
 * Open before `session.connect`, where it answers `unauthenticated`.
 */
export const rpcCall = clientFrame({
  type: 'rpc.call',
  summary: 'Call a server method: `{protocol: 1, method, params}`; answers `rpc.ok` or `rpc.error`.',
  auth: false,
  payload: z.unknown().meta({
    description: '`{protocol: 1, method: string, params: object}`, checked by the dispatcher so that every failure answers `rpc.error`; an absent payload reads as `{}`',
  }),
  absent: 'empty',
  missing: 'invalid_payload',
  reply: { type: 'rpc.ok', payload: RpcOk },
});

export const rpcFrames = [rpcCall];

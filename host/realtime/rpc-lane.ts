/**
 * The RPC kind's side of a script lane: the VM of the game directory's
 * `rpc.lua`, on the one lane that serves it (its globals are shared by every
 * caller, so there is one). Other lanes answer every call `unknown`.
 */
import { ScriptRpc } from '../../runtime/lua/rpc';
import type { RpcCommand } from './lanes/protocol';
import type { LaneContext, LaneHandler } from './lanes/runner';

export class RpcLane implements LaneHandler<RpcCommand> {
  readonly #rpc: ScriptRpc | null;
  readonly size = 0;

  constructor(private readonly lane: LaneContext) {
    this.#rpc = lane.rpc
      ? new ScriptRpc({
          source: lane.source,
          budgets: lane.budgets,
          services: {
            log: lane.log.child({ component: 'rpc_script' }),
            limits: lane.limits,
            clock: lane.clock,
            ids: lane.ids,
            send: (playerId, message) => lane.emit({ kind: 'lane', k: 'send', playerId, message }),
            bindings: lane.bindings,
            failed: lane.failed,
          },
        })
      : null;
  }

  apply(c: RpcCommand): void {
    this.lane.answer(c.req, this.#rpc ? this.#rpc.call(c.method, c.playerId, c.params) : { ok: false, unknown: true });
  }

  close(): void {}
}

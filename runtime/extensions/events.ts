import type { ExtensionHost } from '../contracts/extension';
import type { LiveState } from '../contracts/live';
import { EventName, MAX_EVENT_DATA_BYTES } from '../schemas/modules';

/**
 * An extension's `pushEvent` (ExtensionHost): `module.event` under the
 * extension's own name, through `ctx.live.push`, which reaches the player's
 * sockets on every node of the fleet as `game.send` does. A bad name or
 * payload is the extension's defect, not the player's: it throws, and the
 * player receives nothing rather than a frame its SDK cannot route.
 */
const ENCODER = new TextEncoder();

export function eventPush(module: string, live: Pick<LiveState, 'push'>): ExtensionHost['pushEvent'] {
  return (playerId, event, data) => {
    if (!EventName.safeParse(event).success) throw new Error(`${module}: event ${JSON.stringify(event)} must be <domain>.<name>, at most 64 bytes of A-Z a-z 0-9 _ -`);
    if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new Error(`${module}: the data of ${event} must be an object`);
    // Encoded here for the bound (the push encodes the whole frame once more); runtime/ stays free of node: APIs.
    if (ENCODER.encode(JSON.stringify(data)).byteLength >= MAX_EVENT_DATA_BYTES) throw new Error(`${module}: the data of ${event} must encode under 64 KiB`);
    live.push(playerId, { type: 'module.event', payload: { module, event, data } });
  };
}

import type { LiveState } from '../contracts/live';
import { ApiError } from '../contracts/errors';
import { FrameError } from '../contracts/frame-envelope';

/**
 * `ctx.live` for a host that serves REST only (no WebSocket, no match loops):
 * a node without sockets has nobody to push to, no running matches, worlds or chat
 * channels, no matchmaking queue (tickets are node-local) and no
 * RPC methods. Every answer is what such a node truthfully holds.
 */
export function offlineLive(): LiveState {
  return {
    push: () => 0,
    disconnect: () => {},
    disconnectTokens: () => {},
    matches: { list: () => [], isParticipant: () => false },
    worlds: {
      list: () => [],
      get: () => null,
      create: async () => {
        throw new FrameError('world_server_not_started');
      },
      inWorld: () => false,
    },
    matchmaker: {
      add: (_player, mode) => {
        throw new ApiError('matchmaker.unknown_mode', `This node runs no game modes, so '${mode}' cannot be queued.`, { mode });
      },
      get: () => {
        throw new ApiError('matchmaker.ticket_not_found');
      },
      remove: () => {
        throw new ApiError('matchmaker.ticket_not_found');
      },
      samples: () => ({}),
      sampledAt: () => null,
    },
    rpc: {
      call: async (method) => {
        throw new ApiError('rpc.unknown_method', `No RPC method '${method}' on this node.`, { method });
      },
    },
    chat: {
      worlds: () => null,
      deliver: () => {},
      evict: () => {},
      recent: () => null,
      running: () => [],
      // No `persist`: without a group commit each message (a direct one over REST) is stored on its own.
    },
    presence: { get: () => null, onlineCount: () => 0 },
  };
}

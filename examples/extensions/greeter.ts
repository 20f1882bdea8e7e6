import { ApiError } from '../../runtime/contracts/errors';
import { ExtensionError, ExtensionRefusal, type Extension, type ExtensionHost } from '../../runtime/extensions/extension';

/**
 * An example extension: players keep a greeting and wave it at each other
 * (a `module.event` pushed to the other player), operators read or clear
 * it and may put a player on hold, which makes every erasure of that player
 * refuse (as a legal hold would). It keeps its data in memory to stay short;
 * a real extension keeps it in its own table and erases it with `on.trx`, so
 * a refusal by a later extension rolls its deletion back too.
 */

const greetings = new Map<string, string>();
/** What the node lent at boot; `wave` pushes through it. */
let host: ExtensionHost | null = null;
const held = new Set<string>();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function playerIdOf(input: Record<string, unknown>): string {
  const id = input.player_id;
  if (typeof id !== 'string' || !UUID.test(id)) throw new ExtensionError('greeter.invalid_player', 'player_id must be a uuid.', { field: 'player_id' });
  return id;
}

const greeter: Extension = {
  name: 'greeter',
  version: '1.0.0',
  seams: ['rpc', 'actions', 'export', 'erase'],
  rpc: {
    set: {
      codes: ['rpc.invalid_params'],
      handle: (params, call) => {
        if (typeof params.text !== 'string' || params.text.length < 1 || params.text.length > 140) {
          throw new ApiError('rpc.invalid_params', 'text must be 1-140 characters.');
        }
        greetings.set(call.playerId, params.text);
        return { text: params.text };
      },
    },
    hello: {
      handle: (_params, call) => ({ text: greetings.get(call.playerId) ?? 'Hello!' }),
    },
    // The other player, online on any node, receives module.event greeter.waved with the caller's greeting.
    wave: {
      codes: ['rpc.invalid_params'],
      handle: (params, call) => {
        if (typeof params.player_id !== 'string' || !UUID.test(params.player_id)) throw new ApiError('rpc.invalid_params', 'player_id must be a uuid.');
        host?.pushEvent(params.player_id, 'greeter.waved', { from: call.playerId, text: greetings.get(call.playerId) ?? 'Hello!' });
        return {};
      },
    },
  },
  actions: {
    greeting: {
      method: 'GET',
      capability: 'player_data',
      errors: { 'greeter.invalid_player': 400, 'greeter.not_found': 404 },
      handle: (query) => {
        const id = playerIdOf(query);
        const text = greetings.get(id);
        if (text === undefined) throw new ExtensionError('greeter.not_found', 'That player has no greeting.');
        return { player_id: id, text, held: held.has(id) };
      },
    },
    clear: {
      method: 'DELETE',
      capability: 'player_data',
      errors: { 'greeter.invalid_player': 400, 'greeter.not_found': 404 },
      handle: (body) => {
        const id = playerIdOf(body);
        if (!greetings.delete(id)) throw new ExtensionError('greeter.not_found', 'That player has no greeting.');
        return { player_id: id, cleared: true };
      },
    },
    hold: {
      method: 'POST',
      capability: 'erasure',
      errors: { 'greeter.invalid_player': 400 },
      handle: (body) => {
        const id = playerIdOf(body);
        if (body.held === false) held.delete(id);
        else held.add(id);
        return { player_id: id, held: held.has(id) };
      },
    },
  },
  setup: (lent) => {
    host = lent;
  },
  export: (playerId) => ({ greeting: greetings.get(playerId) ?? null, held: held.has(playerId) }),
  erase: (playerId) => {
    if (held.has(playerId)) throw new ExtensionRefusal('the player is on hold');
    greetings.delete(playerId);
  },
};

export default greeter;

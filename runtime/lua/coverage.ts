/**
 * The binding registry: every callback, global and `game.*` binding of the
 * Lua reference, with where it runs and its status here. docs/scripting.md's
 * coverage table is generated from it (`npm run coverage-table`), and
 * test/script-coverage.test.ts checks it both ways against the `game`
 * tables real VMs carry and against docs/scripting.md, so neither can drift.
 */

export type SurfaceKind = 'callback' | 'global' | 'binding';
/** Which VMs a name belongs to: match, world (global), zone, bot script, or the boot loader that reads globals without a `game` table. */
export type VmKind = 'match' | 'world' | 'zone' | 'bot' | 'loader';

export interface SurfaceEntry {
  kind: SurfaceKind;
  /** As a script writes it: `tick`, `match_size`, `game.chat.send`. */
  name: string;
  vms: readonly VmKind[];
  /** `built`, or why not (naming the decision that leaves it out or changes it). */
  status: string;
}

const M: VmKind[] = ['match'];
const W: VmKind[] = ['world'];
const Z: VmKind[] = ['zone'];
const MW: VmKind[] = ['match', 'world'];
const MWZ: VmKind[] = ['match', 'world', 'zone'];
const WZ: VmKind[] = ['world', 'zone'];
const BUILT = 'built';

const callback = (name: string, vms: VmKind[], status = BUILT): SurfaceEntry => ({ kind: 'callback', name, vms, status });
const global = (name: string, vms: VmKind[], status = BUILT): SurfaceEntry => ({ kind: 'global', name, vms, status });
const binding = (name: string, vms: VmKind[], status = BUILT): SurfaceEntry => ({ kind: 'binding', name, vms, status });

export const REFERENCE_SURFACE: readonly SurfaceEntry[] = [
  callback('init', MW),
  callback('join', MW),
  callback('leave', MW),
  callback('handle_input', ['match', 'zone']),
  callback('tick', M),
  callback('get_state', M, 'built (per-player and `state_strategy = "shared"` forms)'),
  callback('vote_requested', M),
  callback('vote_resolved', M),
  callback('phases', MW, 'built (matches: once per match in a probe VM; decision 0040)'),
  callback('on_phase_started', MW),
  callback('on_phase_ended', MW),
  callback('spawn_position', W),
  callback('post_tick', W),
  callback('generate_world', W),
  callback('spawn_templates', W),
  callback('terrain_provider', W),
  callback('on_zone_loaded', W),
  callback('on_zone_unloaded', W),
  callback('on_world_recovered', W),
  callback('zone_tick', Z),
  callback('handle_effects', Z),
  callback('think', ['bot'], 'built (decision 0039)'),

  global('match_size', MW),
  global('max_players', MW),
  global('min_players', MW),
  global('strategy', MW),
  global('game_type', MW),
  global('state_strategy', M),
  global('listed', MW),
  global('quick_play', MW),
  global('bots', M, 'built (decision 0039)'),
  global('tick_rate', W),
  global('grid_size', W),
  global('zone_size', W),
  global('view_radius', W),
  global('broadcast_interval', W),
  global('persistent', W),
  global('empty_grace_ms', W),
  global('player_ttl_ms', W),
  global('lazy_zones', W),
  global('zone_idle_timeout', W),
  global('max_active_zones', W),
  global('spatial_grid_cell_size', W, 'accepted, no effect: spatial queries need no grid here (decision 0038)'),
  global('cold_tick_divisor', W),
  global('border_band', W),
  global('guest_auth', ['loader']),
  global('script_registration', ['loader'], 'built (`registration` accepted as an alias)'),
  global('names', ['bot'], 'built (decision 0039)'),

  binding('game.id', MWZ),
  binding('game.log', MWZ),
  binding('game.broadcast', MWZ),
  binding('game.send', MWZ),
  binding('game.chat.send', MWZ, 'built (per-channel `script_chat` limit; decision 0040)'),
  binding('game.match.set_joinable', MWZ, 'built (world and zone scripts get an error envelope)'),
  binding('game.bots.add', MWZ, 'built (decision 0039; world and zone scripts get an error envelope)'),
  binding('game.bots.remove', MWZ, 'built (decision 0039; world and zone scripts get an error envelope)'),
  binding('game.economy.grant', MWZ, 'built (script workers only)'),
  binding('game.economy.debit', MWZ, 'built (script workers only)'),
  binding('game.economy.balance', MWZ, 'built (script workers only)'),
  binding('game.economy.purchase', MWZ, 'built (script workers only)'),
  binding('game.storage.get', MWZ, 'built (script workers only; absent with `storage: false`)'),
  binding('game.storage.set', MWZ, 'built (script workers only; absent with `storage: false`)'),
  binding('game.storage.player_get', MWZ, 'built (script workers only; absent with `storage: false`)'),
  binding('game.storage.player_set', MWZ, 'built (script workers only; absent with `storage: false`)'),
  binding('game.leaderboard.submit', MWZ),
  binding('game.leaderboard.top', MWZ),
  binding('game.leaderboard.rank', MWZ),
  binding('game.leaderboard.around', MWZ),
  binding('game.receipts.get', MWZ, 'svc addition (decision 0035; script workers only)'),
  binding('game.receipts.redeem', MWZ, 'svc addition (decision 0035; script workers only)'),
  binding('game.notify', MWZ),
  binding('game.notify_many', MWZ),
  binding('game.spatial.query_radius', WZ, 'built (entity-list form in worlds and zones, zone form in zones)'),
  binding('game.spatial.query_rect', WZ),
  binding('game.spatial.nearest', WZ),
  binding('game.spatial.neighbours_radius', WZ),
  binding('game.spatial.neighbours_rect', WZ),
  binding('game.spatial.in_range', WZ),
  binding('game.spatial.distance', WZ),
  binding('game.zone.spawn', Z),
  binding('game.zone.despawn', Z),
  binding('game.zone.apply', Z),
  binding('game.terrain.get_chunk', WZ),
  binding('game.terrain.preload', WZ),
];

/** The `game.*` names the registry says a VM kind carries (for the drift check). */
export function bindingsOf(vm: VmKind): string[] {
  return REFERENCE_SURFACE.filter((e) => e.kind === 'binding' && e.vms.includes(vm)).map((e) => e.name);
}

/** The docs/scripting.md table, one row per entry, in registry order. */
export function coverageTable(): string {
  const rows = REFERENCE_SURFACE.map((e) => `| \`${e.name}\` | ${e.kind} | ${e.vms.join(', ')} | ${e.status} |`);
  return ['| name | kind | where | status |', '|---|---|---|---|', ...rows].join('\n');
}

export const COVERAGE_BEGIN = '<!-- coverage table: generated by `npm run coverage-table` from runtime/lua/coverage.ts; do not edit by hand -->';
export const COVERAGE_END = '<!-- end of coverage table -->';

/** The page (docs/scripting.md) with its coverage table replaced by the registry's; throws when the markers are missing. */
export function withCoverageTable(readme: string): string {
  const begin = readme.indexOf(COVERAGE_BEGIN);
  const end = readme.indexOf(COVERAGE_END);
  if (begin < 0 || end < begin) throw new Error('docs/scripting.md has no coverage table markers');
  return readme.slice(0, begin + COVERAGE_BEGIN.length) + '\n' + coverageTable() + '\n' + readme.slice(end);
}

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePhases } from '../runtime/phases/phases';
import { vmOf } from './fixtures/games/harness';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame } from './support/ws-client';

/**
 * Match phases (declared by `phases(config)`) over real sockets: the declaration
 * in its probe VM, every `start` form, the callbacks on each transition,
 * the `phase` block of listings and joins, and the `phases_complete` ending.
 */

const CALLBACKS = `
function init(config) return { log = {}, tick = 0 } end
function join(player_id, state) state.log[#state.log + 1] = "join" return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state) return state end
function tick(state) state.tick = state.tick + 1 return state end
function get_state(player_id, state) return { log = state.log, probe_global = probe_global ~= nil } end
function on_phase_started(name, state)
  state.log[#state.log + 1] = "started:" .. name
  game.broadcast("phase_log", { event = "started", name = name })
  return state
end
function on_phase_ended(name, state)
  state.log[#state.log + 1] = "ended:" .. name
  game.broadcast("phase_log", { event = "ended", name = name })
  return state
end
`;

const game = gameDir({
  'config.lua': 'return { staged = "staged.lua", short = "short.lua", sloppy = "sloppy.lua", plain = "plain.lua" }',
  // Every start form, in one sequence; the list is right only when the probe's game.* answered false and config was empty.
  'staged.lua': `
match_size = 1
max_players = 2
listed = true
quick_play = true
function phases(config)
  probe_global = true
  if game.broadcast("probe_check", {}) ~= false or next(config) ~= nil then return { { name = "wrong" } } end
  return {
    { name = "warmup", duration = 300 },
    { name = "gather", start = { players = 2 }, duration = 200 },
    { name = "ready", start = "all_ready", duration = 200 },
    { name = "pause", start = 300, duration = 200 },
    { name = "final", start = { timer = 200 }, duration = 300, config = { laps = 3 } },
  }
end
${CALLBACKS}`,
  'short.lua': `
match_size = 1
quick_play = true
function phases(config) return { { name = "only", start = "prev_ended", duration = 200 } } end
${CALLBACKS}`,
  // Decoding rules: a nameless entry is dropped, a non-number duration is 0 (no timer), an unknown start is prev_ended.
  'sloppy.lua': `
match_size = 1
listed = true
quick_play = true
function phases(config)
  return { { duration = 100 }, { name = "first", duration = "soon", start = "whenever" }, { name = "second" } }
end
${CALLBACKS}`,
  'plain.lua': `
match_size = 1
listed = true
quick_play = true
${CALLBACKS}`,
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

const phaseLog = (f: Frame) => f.type === 'match.phase_log';

async function listed(mode: string, matchId: string, socket: Awaited<ReturnType<typeof connectPlayer>>['socket']) {
  const reply = await socket.request('match.list', { mode });
  return (reply.payload.matches as any[]).find((m) => m.match_id === matchId);
}

describe('match phases', () => {
  it('runs every start form in order, from creation to phases_complete', async () => {
    const a = await connectPlayer(s);
    const joined = await a.socket.request('match.find_or_create', { mode: 'staged' });
    expect(joined.type).toBe('match.joined');
    const matchId = joined.payload.match_id as string;
    // The first phase started when the match was created, before this join.
    expect(joined.payload.phase).toMatchObject({ status: 'active', phase: 'warmup' });
    expect(joined.payload.phase.remaining_ms).toBeGreaterThanOrEqual(0);
    expect(joined.payload.phase.remaining_ms).toBeLessThanOrEqual(300);
    const first = await a.socket.next('match.state', 10_000);
    expect(first.payload.log.slice(0, 2)).toEqual(['started:warmup', 'join']);
    // What the probe VM did stays in the probe.
    expect(first.payload.probe_global).toBe(false);

    // warmup ends on its timer; gather waits for a second player.
    expect((await a.socket.next(phaseLog, 10_000)).payload).toEqual({ event: 'ended', name: 'warmup' });
    const waiting = await listed('staged', matchId, a.socket);
    expect(waiting.phase).toEqual({ status: 'waiting', phase: 'gather', start_condition: { type: 'players', value: 2 } });
    const rest = await s.call('GET', '/api/v1/matches/live?mode=staged', { token: a.token });
    expect(rest.status).toBe(200);
    expect(rest.body.matches.find((m: any) => m.match_id === matchId).phase).toEqual(waiting.phase);

    const b = await connectPlayer(s);
    const second = await b.socket.request('match.join', { match_id: matchId });
    expect(second.type).toBe('match.joined');

    const events: string[] = [];
    for (;;) {
      const f = await a.socket.next((f) => phaseLog(f) || f.type === 'match.finished', 15_000);
      if (f.type === 'match.finished') {
        expect(f.payload).toEqual({ match_id: matchId, result: { status: 'phases_complete' } });
        break;
      }
      events.push(`${f.payload.event}:${f.payload.name}`);
    }
    expect(events).toEqual([
      'started:gather',
      'ended:gather',
      'started:ready',
      'ended:ready',
      'started:pause',
      'ended:pause',
      'started:final',
      'ended:final',
    ]);
    // The second player saw the same ending.
    const ended = await b.socket.next('match.finished', 5000);
    expect(ended.payload.result).toEqual({ status: 'phases_complete' });
    // The record is written right after the frame goes out.
    let record = await s.call('GET', `/api/v1/matches/${matchId}`, { token: a.token });
    for (let i = 0; i < 50 && record.status === 404; i++) {
      await new Promise((r) => setTimeout(r, 100));
      record = await s.call('GET', `/api/v1/matches/${matchId}`, { token: a.token });
    }
    expect(record.status).toBe(200);
    expect(record.body.result).toEqual({ status: 'phases_complete' });
    a.socket.close();
    b.socket.close();
  });

  it('finishes a match whose script never does once its last phase ends', async () => {
    const p = await connectPlayer(s);
    const joined = await p.socket.request('match.find_or_create', { mode: 'short' });
    const done = await p.socket.next('match.finished', 10_000);
    expect(done.payload).toEqual({ match_id: joined.payload.match_id, result: { status: 'phases_complete' } });
    p.socket.close();
  });

  it('decodes a sloppy declaration as the reference says', async () => {
    const p = await connectPlayer(s);
    const joined = await p.socket.request('match.find_or_create', { mode: 'sloppy' });
    // The nameless entry is gone; "first" has no timer (its duration was not a number), so it never ends.
    expect(joined.payload.phase).toEqual({ status: 'active', phase: 'first', remaining_ms: null });
    const st = await p.socket.next((f) => f.type === 'match.state' && f.payload.log.length >= 2, 10_000);
    expect(st.payload.log).toEqual(['started:first', 'join']);
    const problems = s.logs.filter((l) => l.event === 'match_phases_problem' && l.match_id === joined.payload.match_id);
    expect(problems.map((l) => l.problem)).toEqual([
      'phases[1] has no string name; dropped',
      'phases[2] (first): duration is not a number; 0 (no timer) used',
      'phases[2] (first): start must be "prev_ended", "all_ready", a number of ms, { players = N } or { timer = ms }; prev_ended used',
    ]);
    p.socket.close();
  });

  it('lists a mode without phases with no phase block', async () => {
    const p = await connectPlayer(s);
    const joined = await p.socket.request('match.find_or_create', { mode: 'plain' });
    expect('phase' in joined.payload).toBe(false);
    expect('phase' in (await listed('plain', joined.payload.match_id, p.socket))).toBe(false);
    p.socket.close();
  });
});

describe('the demo game', () => {
  it("declares skirmish's phases cleanly, and the probe VM leaves the match untouched", () => {
    const { vm, recorded } = vmOf(readFileSync(new URL('../examples/demo-game/skirmish.lua', import.meta.url), 'utf8'));
    expect(vm.init().ok).toBe(true);
    const { phases, problems } = parsePhases(vm.probePhases());
    expect(problems).toEqual([]);
    expect(phases.map((p) => [p.name, p.durationMs, p.start])).toEqual([
      ['warmup', 5000, { type: 'prev_ended' }],
      ['fight', 30000, { type: 'players', count: 2 }],
      ['results', 5000, { type: 'prev_ended' }],
    ]);
    // on_phase_started's broadcast only happens in the match's own VM, once the host starts the phase.
    expect(recorded.broadcasts).toEqual([]);
    expect(vm.phase('on_phase_started', 'warmup').ok).toBe(true);
    expect(recorded.broadcasts).toEqual([['phase', { name: 'warmup' }]]);
    vm.close();
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { ReplayProperty, replayWorldScript, sleep } from './support/world-replay';

/**
 * The property of issue 35: whatever the players do (accepted and refused
 * inputs, zone crossings, spawns and despawns), a client replaying what it
 * receives sees exactly the zone's entities, tick by tick, on the JSON wire
 * and on the binary one. The world, the replay client and the checks are in
 * support/world-replay.ts; here, on one lane and a 3 × 3 grid, the inputs
 * write fields of every kind, and one field beyond 32 bits forces the binary
 * wire back to text for the zones it visits.
 */

const SEED = Number(process.env.WORLD_WIRES_SEED ?? 35_035);
const INPUTS = 220;
const STEPS = [-45, -30.5, -12.25, 12.25, 30.5, 45];
const LABELS = ['north', 'south', 'ëast', 'w€st', ''];
const SCORES = [3, 3.5, -2, 0.25, 7, 1e6];
const CLEARABLE = ['label', 'flag', 'score', 'big', 'w'];

let s: TestServer;
let game: ReturnType<typeof gameDir>;

beforeAll(async () => {
  game = gameDir({ 'config.lua': 'return { wires = "wires.lua" }', 'wires.lua': replayWorldScript({ grid: 3, start: 150 }) });
  s = await startTestServer({}, { gameDir: game.dir });
});
afterAll(async () => {
  await s?.close();
  game?.remove();
});

describe('world.tick replayed on both wires', () => {
  it(`a client replaying either wire sees exactly each watched zone's entities through random inputs, refusals, crossings and spawns (seed ${SEED})`, { timeout: 60_000 }, async () => {
    const run = await ReplayProperty.start(s, 'wires', { grid: 3, start: 150, replyMs: 5000 });
    const [a, b] = run.players;

    // Opening moves take the players to opposite corners, so both see zones leave and enter their view.
    for (let i = 0; i < 3; i++) {
      run.input(a, { dx: -45, dy: -45 });
      run.input(b, { dx: 45, dy: 45 });
      await sleep(60);
    }

    await run.drive({ seed: SEED, inputs: INPUTS, resyncAt: [Math.floor(INPUTS / 3), Math.floor((2 * INPUTS) / 3)] }, ({ i, p, random, pick }) => {
      const r = random();
      if (i === Math.floor(INPUTS * 0.7)) run.input(b, { big: true });
      else if (r < 0.34) run.move(p, pick(STEPS), pick(STEPS));
      else if (r < 0.42) run.input(p, { label: pick(LABELS) });
      else if (r < 0.5) run.input(p, { flag: random() < 0.5 });
      else if (r < 0.57) run.input(p, { score: pick(SCORES) });
      else if (r < 0.65) run.input(p, { clear: pick(CLEARABLE) });
      else if (r < 0.71) run.input(p, { spawn: 0 });
      else if (r < 0.76) run.input(p, { despawn: true });
      else if (r < 0.78) run.input(p, { inf: true });
      else run.input(p, { [pick(['bad', 'nothing', 'number'])]: true });
    });

    run.expectHeld({ truths: 100, refused: 20 });
    // The field beyond 32 bits sent b's zones to text: b's binary socket replayed text frames too.
    const bBinary = run.sockets[3]!;
    expect(bBinary.label).toBe('b/binary');
    expect(bBinary.seen.text).toBeGreaterThan(0);
    run.close();
  });
});

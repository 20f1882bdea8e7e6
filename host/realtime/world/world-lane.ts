/**
 * The world kind's side of a script lane: every world the lane holds
 * (world-run.ts runs its VMs), stepped by the commands the world host sends
 * and reporting each step's output as one event.
 */
import type { ModeInfo } from '../../../runtime/lua/host-interface';
import type { PoseManifest } from '../../../runtime/worlds/pose-datagram';
import { parseVoteConfig } from '../../../runtime/votes/engine';
import type { Answer, WorldCommand } from '../lanes/protocol';
import type { LaneContext, LaneHandler } from '../lanes/runner';
import type { MessagePort } from 'node:worker_threads';
import { WorldRun, type TickSplit, type WorldRecovery } from './world-run';
import { LaneStripe, stripeId, worldScriptOptions } from './zone-stripes';

interface LaneWorld {
  run: WorldRun;
  /** A vote the world asked for through `_vote` is open: no other starts meanwhile. */
  voting: boolean;
  /** The phase listing last sent, as text. */
  phase: string | null;
  /** Commands that came while a round was out to the world's other lanes, applied in order once it settled. */
  held: WorldCommand[];
  stripes: number;
  /** The due time of the last tick this lane ran or skipped; null before the first. */
  lastDue: number | null;
  /** When the last tick's round settled (epoch ms). */
  settledAt: number;
  /** Cancels the standby tick armed for the next due time, if one is. */
  standby: (() => void) | null;
  /** Ticks in a row the standby ran (none of their commands came first). */
  standbyRun: number;
}

/**
 * How long past a tick's due time the lane waits for the main thread's
 * command before running the tick itself (a fifth of the period at most).
 * The command comes within a few milliseconds unless the main thread is
 * held up; waiting that long keeps the inputs it brings in their tick.
 */
const STANDBY_GRACE_MS = 10;
/**
 * Ticks in a row the standby runs alone: a main thread held up a few periods
 * (a full collection of a large heap) costs no tick, and one that stopped
 * sending them (shut down, hung) stops the world within a fifth of a second.
 */
const STANDBY_RUN_MAX = 4;

type TickFigures = { lateMs: number; busyMs: number; deltaBytes: number; split: TickSplit; lanes: number[] };

export class WorldLane implements LaneHandler<WorldCommand> {
  readonly #worlds = new Map<string, LaneWorld>();
  /** Stripes of worlds whose home is another lane, by their pool id. */
  readonly #stripes = new Map<string, LaneStripe>();
  /** Links between a world's home lane and a stripe's lane, by the stripe's pool id (this lane holds one end). */
  readonly #links = new Map<string, MessagePort>();

  constructor(private readonly lane: LaneContext) {}

  get size(): number {
    return this.#worlds.size + this.#stripes.size;
  }

  apply(c: WorldCommand): void {
    if (c.op === 'stripe_link') return this.#link(c.worldId, c.stripe, c.port);
    if (c.op === 'stripe') return this.#stripe(c.worldId, c.stripe, c.msg);
    if (c.op === 'stripe_answer') return this.#worlds.get(c.worldId)?.run.stripeAnswer(c.stripe, c.msg);
    const w = c.op === 'create' ? undefined : this.#worlds.get(c.worldId);
    // A world waiting on its other lanes takes nothing else until they answered: its state is mid-tick.
    if (w !== undefined && w.run.waiting && c.op !== 'close') return void w.held.push(c);
    this.#apply(c);
  }

  #apply(c: WorldCommand): void {
    switch (c.op) {
      case 'create':
        return this.lane.answer(c.req, this.#create(c.worldId, c.mode, c.seed, c.recovery, c.poses, c.stripes));
      case 'join': {
        const w = this.#worlds.get(c.worldId);
        if (!w) return this.lane.answer(c.req, { ok: false, refused: false, kind: 'error', message: 'no such world' });
        const r = w.run.join(c.playerId, c.ctx, c.binary);
        this.lane.answer(c.req, r);
        return this.#output(c.worldId, w, null);
      }
      case 'leave': {
        const w = this.#worlds.get(c.worldId);
        if (w) {
          if (c.detach) w.run.detach(c.playerId);
          else w.run.leave(c.playerId);
          this.#output(c.worldId, w, null);
        }
        return this.lane.answer(c.req, { ok: true });
      }
      case 'input':
        return this.#worlds.get(c.worldId)?.run.input(c.playerId, c.input, c.seq);
      case 'resync': {
        const w = this.#worlds.get(c.worldId);
        if (!w) return;
        w.run.resync(c.playerId, c.x, c.y, c.binary);
        return this.#output(c.worldId, w, null);
      }
      case 'tick':
        return this.#tick(c.worldId, c.due, c.own === true);
      case 'snapshot': {
        const w = this.#worlds.get(c.worldId);
        if (w) {
          w.run.snapshot((zones) => {
            this.lane.emit({ kind: 'world', k: 'snapshot', worldId: c.worldId, zones });
            this.#release(w);
          });
        }
        return;
      }
      case 'close': {
        const w = this.#worlds.get(c.worldId);
        if (!w) return;
        this.#closeWorld(w);
        return this.#release(w);
      }
      case 'vote_resolved': {
        const w = this.#worlds.get(c.worldId);
        if (w) w.voting = false;
        return;
      }
      case 'stripe':
      case 'stripe_answer':
      case 'stripe_link':
        return;
    }
  }

  /**
   * The world's round settled: what waited for it runs now, in order, until
   * another round goes out. A world that ended meanwhile answers them as
   * any command for a world that is gone.
   */
  #release(w: LaneWorld): void {
    while (w.held.length > 0 && !(w.run.waiting && this.#worlds.get(w.run.worldId) === w)) this.#apply(w.held.shift()!);
  }

  #link(worldId: string, s: number, port: MessagePort): void {
    if (!this.lane.adopt) return void port.close();
    this.lane.adopt(port);
    this.#links.set(stripeId(worldId, s), port);
  }

  /** Over the link to the other end: a one-command batch of that lane. */
  #over(worldId: string, s: number, command: WorldCommand): void {
    this.#links.get(stripeId(worldId, s))?.postMessage([command]);
  }

  #unlink(worldId: string, s: number): void {
    const id = stripeId(worldId, s);
    this.#links.get(id)?.close();
    this.#links.delete(id);
  }

  #closeWorld(w: LaneWorld): void {
    const worldId = w.run.worldId;
    w.standby?.();
    w.standby = null;
    w.run.close();
    this.#worlds.delete(worldId);
    this.#unlinkStripes(worldId, w.stripes);
  }

  /** The home lane's ends of the links to every other stripe of the world. */
  #unlinkStripes(worldId: string, stripes: number): void {
    for (let s = 1; s < stripes; s++) this.#unlink(worldId, s);
  }

  /** A message for a stripe of a world whose home is another lane. */
  #stripe(worldId: string, s: number, msg: Extract<WorldCommand, { op: 'stripe' }>['msg']): void {
    const id = stripeId(worldId, s);
    if (msg.t === 'open') {
      this.#stripes.get(id)?.close();
      this.#stripes.set(id, new LaneStripe(this.lane, worldId, msg));
      return;
    }
    const stripe = this.#stripes.get(id);
    if (!stripe) return;
    if (msg.t === 'close') {
      stripe.close();
      this.#stripes.delete(id);
      return this.#unlink(worldId, s);
    }
    const answer = stripe.handle(msg);
    if (answer) this.#over(worldId, s, { kind: 'world', op: 'stripe_answer', worldId, stripe: s, msg: answer });
  }

  #create(worldId: string, mode: ModeInfo, seed: number, recovery: WorldRecovery | null, poses: PoseManifest | null, stripes: number): Answer {
    if (!mode.world) return { ok: false };
    const lane = this.lane;
    const run = WorldRun.start(
      {
        ...worldScriptOptions(lane, worldId, mode),
        seed,
        poses,
        stripes,
        relay: (stripe, msg) => this.#over(worldId, stripe, { kind: 'world', op: 'stripe', worldId, stripe, msg }),
      },
      recovery,
    );
    if (!run) {
      this.#unlinkStripes(worldId, stripes);
      return { ok: false };
    }
    const world: LaneWorld = { run, voting: false, phase: null, held: [], stripes, lastDue: null, settledAt: 0, standby: null, standbyRun: 0 };
    this.#worlds.set(worldId, world);
    this.#output(worldId, world, null);
    return { ok: true };
  }

  /**
   * A tick due at `due`: from the main thread's wheel, or (`own`) this lane's
   * standby for it. The main thread's clock decides when a tick is due, and
   * its command brings the inputs that came before it; but a main thread
   * held up (a collection, a burst of socket writes) would hold up the world
   * too, and a tick that starts late ends late, so the next one finds the
   * world busy and is skipped. So after each tick the lane arms a standby a
   * little past the next due time: whichever of the two comes first runs
   * the tick, the other is ignored (decision 0070). After STANDBY_RUN_MAX
   * ticks in a row from the standby alone, a main thread that stopped
   * sending ticks stops the world's clock. The lane decides what is
   * skipped, since it knows when its world was busy: a tick whose due time
   * found the previous one still running, one a whole period late, and the
   * due times it never heard of.
   */
  #tick(worldId: string, due: number, own: boolean): void {
    const w = this.#worlds.get(worldId);
    if (!w) return this.lane.emit({ kind: 'world', k: 'skipped', worldId });
    // Its standby ran it already (or ran a later one).
    if (w.lastDue !== null && due <= w.lastDue) return;
    w.standby?.();
    w.standby = null;
    w.standbyRun = own ? w.standbyRun + 1 : 0;
    const period = w.run.settings.tick_rate;
    const unheard = w.lastDue === null ? 0 : Math.max(0, Math.round((due - w.lastDue) / period) - 1);
    w.lastDue = due;
    const started = Date.now();
    const t0 = performance.now();
    const lateMs = started - due;
    if (w.run.waiting || w.settledAt > due || lateMs >= period) {
      this.lane.emit({ kind: 'world', k: 'skipped', worldId, n: unheard + 1 });
      this.#armStandby(worldId, w, due + period);
      return;
    }
    if (unheard > 0) this.lane.emit({ kind: 'world', k: 'skipped', worldId, n: unheard });
    w.run.step(started, () => {
      w.settledAt = Date.now();
      this.#ticked(worldId, w, lateMs, t0);
      this.#release(w);
      // A later tick released just now armed its own standby.
      if (this.#worlds.get(worldId) === w && w.lastDue === due) this.#armStandby(worldId, w, due + period);
    });
  }

  #armStandby(worldId: string, w: LaneWorld, due: number): void {
    const later = this.lane.later;
    if (!later || w.standbyRun >= STANDBY_RUN_MAX) return;
    const grace = Math.min(STANDBY_GRACE_MS, w.run.settings.tick_rate / 5);
    w.standby?.();
    w.standby = later(Math.max(0, due + grace - Date.now()), [{ kind: 'world', op: 'tick', worldId, due, own: true }]);
  }

  #ticked(worldId: string, w: LaneWorld, lateMs: number, t0: number): void {
    if (this.#worlds.get(worldId) !== w) return;
    const finished = w.run.finished;
    if (finished) {
      this.#output(worldId, w, null);
      this.#closeWorld(w);
      return this.lane.emit({ kind: 'world', k: 'finished', worldId, result: finished });
    }
    const vote = w.run.takeVote();
    if (vote !== null && !w.voting) {
      const asked = parseVoteConfig(vote);
      if (asked !== null && asked.ok) {
        w.voting = true;
        this.lane.emit({ kind: 'world', k: 'vote', worldId, config: { ...asked.config, vote_id: asked.config.vote_id ?? this.lane.ids.uuid() } });
      }
    }
    this.#output(worldId, w, { lateMs, busyMs: performance.now() - t0, deltaBytes: w.run.takeDeltaBytes(), split: w.run.takeSplit(), lanes: w.run.takeLaneMs() });
  }

  /** Sends what the world produced; the phase listing rides along when it changed. */
  #output(worldId: string, w: LaneWorld, tick: TickFigures | null): void {
    const out = w.run.takeOutput();
    const listing = w.run.phaseListing();
    const text = listing === null ? null : JSON.stringify(listing);
    const phase = text !== w.phase ? listing : null;
    w.phase = text;
    if (tick === null && phase === null && out.sends.length === 0 && out.moved.length === 0 && out.poses.length === 0) return;
    this.lane.emit({ kind: 'world', k: 'step', worldId, tick, out, phase });
  }

  close(): void {
    for (const w of this.#worlds.values()) {
      w.standby?.();
      w.run.close();
    }
    this.#worlds.clear();
    for (const stripe of this.#stripes.values()) stripe.close();
    this.#stripes.clear();
    for (const port of this.#links.values()) port.close();
    this.#links.clear();
  }
}

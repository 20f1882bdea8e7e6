/**
 * The match kind's side of a script lane: every match VM the lane holds,
 * with its phases, its bots and its share of the lane. It is the only place
 * a match VM is built (the one VM factory), and it runs one tick's steps:
 * inputs, `tick`, the phases, the views; then the finish and failure checks.
 */
import type { JsonObject, ModeInfo } from '../../../runtime/lua/host-interface';
import { MatchVm } from '../../../runtime/lua/match';
import { parseVoteConfig } from '../../../runtime/votes/engine';
import { isBotId } from '../../../runtime/bots/ids';
import type { Answer, MatchCommand, MatchEvent } from '../lanes/protocol';
import type { LaneContext, LaneHandler } from '../lanes/runner';
import { TICK_MS } from '../lanes/tick-wheel';
import type { ShareAccount } from '../lanes/fair-share';
import { MatchPhases } from './match-phases';
import { LaneBots } from './bot-lane';

interface LaneMatch {
  vm: MatchVm;
  mode: ModeInfo;
  players: Set<string>;
  /** Consecutive ticks on which a callback hit a limit. */
  failing: number;
  /** What stopped the last tick run, or null when it ran to its end. */
  lastFailure: ReturnType<MatchVm['takeLimitFailure']>;
  /** A vote this match asked for has not resolved yet: `vote_requested` is not called meanwhile. */
  voting: boolean;
  /** The mode's phases (null without): they start at creation and move with ticks, joins and leaves. */
  phases: MatchPhases | null;
  /** Its share of the lane: what its ticks took against what it earned (fair-share.ts). */
  share: ShareAccount;
}

type StatesEvent = Extract<MatchEvent, { k: 'states' }>;

export class MatchLane implements LaneHandler<MatchCommand> {
  readonly #matches = new Map<string, LaneMatch>();
  readonly #bots: LaneBots;
  /**
   * The views of this batch's ticks, in tick order, sent after the batch as
   * one event (decision 0075). A match's other events of the tick (its
   * broadcasts, sends, a vote) go out as they happen, so they still reach
   * its players before its view.
   */
  #states: StatesEvent | null = null;

  constructor(private readonly lane: LaneContext) {
    this.#bots = new LaneBots({
      source: lane.source,
      budgets: lane.budgets,
      services: {
        log: lane.log.child({ component: 'bot' }),
        limits: lane.limits,
        clock: lane.clock,
        ids: lane.ids,
        send: () => {},
        failed: lane.failed,
      },
    });
  }

  get size(): number {
    return this.#matches.size;
  }

  apply(c: MatchCommand): void {
    switch (c.op) {
      case 'create':
        return this.lane.answer(c.req, this.#create(c.matchId, c.mode));
      case 'join': {
        const m = this.#matches.get(c.matchId);
        if (!m) return this.lane.answer(c.req, { ok: false, refused: false, kind: 'error', message: 'no such match' });
        const r = m.vm.join(c.playerId, c.ctx);
        if (r.ok) {
          m.players.add(c.playerId);
          m.phases?.players(m.players, c.playerId);
          if (isBotId(c.playerId)) this.#bots.join(c.matchId, c.playerId, m.mode.bots?.script ?? null);
        }
        return this.lane.answer(c.req, r);
      }
      case 'leave': {
        const m = this.#matches.get(c.matchId);
        if (!m || !m.players.delete(c.playerId)) return;
        this.#bots.leave(c.matchId, c.playerId);
        const r = m.vm.leave(c.playerId);
        if (!r.ok) this.lane.log.warn('match_leave_failed', { match_id: c.matchId, kind: r.kind });
        m.phases?.players(m.players, null);
        return;
      }
      case 'input':
        return this.#matches.get(c.matchId)?.vm.input(c.playerId, c.input);
      case 'tick': {
        const vms: MatchVm[] = [];
        for (const matchId of c.matchIds) {
          const m = this.#matches.get(matchId);
          if (m) vms.push(m.vm);
        }
        MatchVm.readAhead(vms);
        for (const matchId of c.matchIds) {
          const kept = this.#states?.frames.length ?? 0;
          try {
            this.#tick(matchId, c.due);
          } catch (err) {
            this.#tickFailed(matchId, kept, err);
          }
        }
        return;
      }
      case 'close':
        return this.#close(c.matchId);
      case 'vote_resolved': {
        const m = this.#matches.get(c.matchId);
        if (!m) return;
        m.voting = false;
        m.vm.voteResolved(c.template, c.result);
        return;
      }
    }
  }

  /** The batch's views go as one event; think times cross once per batch, only the buckets that counted anything. */
  afterBatch(): void {
    if (this.#states !== null) {
      this.lane.emit(this.#states);
      this.#states = null;
    }
    const thinks = this.#bots.takeThinks();
    if (!thinks) return;
    const buckets: [number, number][] = [];
    for (let i = 0; i < thinks.length; i++) if (thinks[i]! > 0) buckets.push([i, thinks[i]!]);
    this.lane.emit({ kind: 'match', k: 'thinks', buckets });
  }

  /** The one VM factory: a match VM with this node's budgets, bindings and services. */
  #create(matchId: string, mode: ModeInfo): Answer {
    const lane = this.lane;
    const log = lane.log.child({ match_id: matchId, mode: mode.name });
    let vm: MatchVm;
    try {
      vm = MatchVm.create({
        source: lane.source,
        mode,
        matchId,
        budgets: lane.budgets,
        services: {
          log,
          limits: lane.limits,
          clock: lane.clock,
          ids: lane.ids,
          bindings: lane.bindings,
          broadcast: (leaf, payload) =>
            lane.emit({ kind: 'match', k: 'broadcast', matchId, text: `{"type":${JSON.stringify(`match.${leaf}`)},"payload":${JSON.stringify(payload)}}` }),
          send: (playerId, message) => lane.emit({ kind: 'lane', k: 'send', playerId, message }),
          scriptError: (playerId, error) => lane.emit({ kind: 'lane', k: 'script_error', playerId, error }),
          failed: lane.failed,
          setJoinable: (joinable) => lane.emit({ kind: 'match', k: 'joinable', matchId, joinable }),
          bots: (op, name) => lane.emit({ kind: 'match', k: 'bots', matchId, op, name }),
        },
      });
    } catch (err) {
      log.warn('match_init_failed', { kind: 'error', message: (err as Error).message });
      return { ok: false };
    }
    const init = vm.init();
    if (!init.ok) {
      vm.close();
      log.warn('match_init_failed', { kind: init.kind, message: init.message });
      return { ok: false };
    }
    const phases = MatchPhases.start(vm, log, (phase) => lane.emit({ kind: 'match', k: 'phase', matchId, phase }));
    this.#matches.set(matchId, { vm, mode, players: new Set(), failing: 0, lastFailure: null, voting: false, phases, share: lane.shares.account(performance.now()) });
    return { ok: true };
  }

  /**
   * A tick that threw (a host bug: the VM contains script failures itself).
   * The slot's other ticks share its command, so it is caught here, not by
   * the runner: they run, the batch's views go back to the `kept` it had
   * before this tick (still lined up with their matches), and this match's
   * tick counts as skipped, which frees it for its next one on the main thread.
   */
  #tickFailed(matchId: string, kept: number, err: unknown): void {
    this.#dropViews(kept);
    this.lane.log.error('script_command_failed', { op: 'tick', match_id: matchId, error: err instanceof Error ? err.message : String(err) });
    this.lane.emit({ kind: 'match', k: 'skipped', matchId });
  }

  /** Ends a match whose ticks failed `match_failing_ticks_max` times in a row. */
  #stopFailing(matchId: string, m: LaneMatch, failure: NonNullable<LaneMatch['lastFailure']>): void {
    this.lane.log.warn('match_script_budget', {
      match_id: matchId,
      mode: m.mode.name,
      script: m.mode.file,
      callback: failure.callback,
      reason_class: failure.kind,
      failing_ticks: m.failing,
    });
    this.#finish(matchId, { status: 'error', reason: 'script_budget' });
  }

  #tick(matchId: string, due: number): void {
    const m = this.#matches.get(matchId);
    const lateMs = Date.now() - due;
    // A tick a whole period late is dropped, never run back to back with the next one.
    if (!m || lateMs >= TICK_MS) return this.lane.emit({ kind: 'match', k: 'skipped', matchId });
    const started = performance.now();
    const tenants = this.lane.tenants();
    const throttled = this.lane.shares.admit(m.share, started, tenants);
    if (throttled) {
      // A match held back for overrunning whose last tick was stopped by a limit counts the ticks it
      // does not run as failing too: its overruns put the lane's allowance in debt for longer than it
      // takes to fail the rest, and held back forever it would keep its players and never be stopped.
      if (throttled === 'overrun' && m.lastFailure !== null && ++m.failing >= this.lane.failingTicksMax) return this.#stopFailing(matchId, m, m.lastFailure);
      return this.lane.emit({ kind: 'match', k: 'throttled', matchId, reason: throttled });
    }
    this.#runTick(matchId, m, lateMs);
    this.lane.shares.charge(m.share, performance.now() - started, tenants);
  }

  /** One tick's steps: inputs, `tick`, the phases, the views; then the finish and failure checks. */
  #runTick(matchId: string, m: LaneMatch, lateMs: number): void {
    // Failures of joins and leaves between ticks do not count against the ticks.
    m.vm.takeLimitFailure();
    const r = m.vm.tick();
    // At most one line per tick, and only after a backlog: a throttled match runs few ticks.
    if (r.inputsDropped > 0) this.lane.log.warn('match_inputs_dropped', { match_id: matchId, mode: m.mode.name, dropped: r.inputsDropped });
    if (r.finished) return this.#finish(matchId, r.finished.result);
    if (!m.voting) this.#requestVote(matchId, m);
    if (m.phases?.tick(TICK_MS)) return this.#finish(matchId, { status: 'phases_complete' });
    const out = (this.#states ??= { kind: 'match', k: 'states', matchIds: [], lateMs: [], counts: [], to: [], frames: [] });
    const mark = out.frames.length;
    if (m.mode.state_strategy === 'shared') {
      const first = m.players.values().next();
      const view = first.done ? null : m.vm.viewJson(first.value);
      if (view !== null) {
        out.to.push(null);
        out.frames.push(stateFrame(view));
      }
      for (const playerId of m.players) if (view !== null && this.#bots.drives(matchId, playerId)) this.#botInput(m, matchId, playerId, view);
    } else {
      for (const playerId of m.players) {
        const view = m.vm.viewJson(playerId);
        // A bot's view goes to its think, never to a socket.
        if (this.#bots.drives(matchId, playerId)) this.#botInput(m, matchId, playerId, view);
        else {
          out.to.push(playerId);
          out.frames.push(stateFrame(view));
        }
      }
    }
    const outcome = m.vm.finished();
    const failure = outcome ? null : m.vm.takeLimitFailure();
    m.failing = failure ? m.failing + 1 : 0;
    m.lastFailure = failure;
    if (outcome || (failure && m.failing >= this.lane.failingTicksMax)) {
      // A tick that ends the match sends no view.
      this.#dropViews(mark);
      return outcome ? this.#finish(matchId, outcome.result) : this.#stopFailing(matchId, m, failure!);
    }
    out.matchIds.push(matchId);
    out.lateMs.push(lateMs);
    out.counts.push(out.frames.length - mark);
  }

  /** Takes back the batch's views after the first `kept`: those of a tick that sends none. */
  #dropViews(kept: number): void {
    if (this.#states === null) return;
    this.#states.to.length = kept;
    this.#states.frames.length = kept;
  }

  /** A bot's decision is queued like a human's input: the next tick's `handle_input` sees it. */
  #botInput(m: LaneMatch, matchId: string, botId: string, view: string): void {
    const input = this.#bots.think(matchId, botId, view);
    if (input !== null) m.vm.input(botId, input);
  }

  #requestVote(matchId: string, m: LaneMatch): void {
    const asked = parseVoteConfig(m.vm.voteRequested());
    if (asked === null) return;
    if (!asked.ok) {
      // A script that keeps asking with a bad table would log every tick: the failing-call rate applies.
      if (this.lane.limits.take('script_log', `${m.mode.file}:vote_requested`).ok) {
        this.lane.log.warn('vote_config_invalid', { match_id: matchId, mode: m.mode.name, script: m.mode.file, problem: asked.problem });
      }
      return;
    }
    m.voting = true;
    this.lane.emit({ kind: 'match', k: 'vote', matchId, config: { ...asked.config, vote_id: asked.config.vote_id ?? this.lane.ids.uuid() } });
  }

  #finish(matchId: string, result: JsonObject): void {
    this.#close(matchId);
    this.lane.emit({ kind: 'match', k: 'finished', matchId, result });
  }

  #close(matchId: string): void {
    this.#bots.close(matchId);
    this.#matches.get(matchId)?.vm.close();
    this.#matches.delete(matchId);
  }

  close(): void {
    this.#bots.closeAll();
    for (const m of this.#matches.values()) m.vm.close();
    this.#matches.clear();
  }
}

function stateFrame(view: string): string {
  return `{"type":"match.state","payload":${view}}`;
}

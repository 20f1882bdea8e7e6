/**
 * What crosses between the main thread and a script lane (a worker thread,
 * or the main thread itself with `match_workers: 0`). The main thread sends
 * commands in batches, one batch per lane after each wheel slot that ticked
 * something on it, the inputs waiting for it (requests that someone awaits
 * go at once); the lane answers each batch with one list of
 * events in the order the scripts caused them.
 *
 * Every command and event carries the `kind` of script it concerns. The
 * runner hands a command to the handler its kind registered
 * (runner.ts); the pool hands an event to the host subscribed to its kind,
 * so the match and world sets below never meet in one switch. `lane` events
 * are the engine's own: answers, logs, failure counts and sends to a player,
 * whichever kind caused them.
 */
import type { PoseManifest } from '../../../runtime/worlds/pose-datagram';
import type { FailureKind, JoinResult, JsonObject, JsonValue, ModeInfo, ScriptErrorReport, ScriptRpcResult } from '../../../runtime/lua/host-interface';
import type { MessagePort } from 'node:worker_threads';
import type { LogFields, LogLevel } from '../../../runtime/platform/log';
import type { RateLimitGroup, RateRule } from '../../../runtime/contracts/settings';
import type { Budgets } from '../../../runtime/lua/host-interface';
import type { VoteConfig } from '../../../runtime/votes/engine';
import type { TickSplit, WorldOutput, WorldRecovery } from '../world/world-run';
import type { FromStripe, ToStripe } from '../world/zone-stripes';
import type { ThrottleReason } from './fair-share';

export type MatchCommand =
  | { kind: 'match'; op: 'create'; req: number; matchId: string; mode: ModeInfo }
  | { kind: 'match'; op: 'join'; req: number; matchId: string; playerId: string; ctx: JsonObject }
  | { kind: 'match'; op: 'leave'; matchId: string; playerId: string }
  | { kind: 'match'; op: 'input'; matchId: string; playerId: string; input: JsonObject }
  /**
   * The ticks of one wheel slot on this lane, in the wheel's order; `due`:
   * epoch ms the slot was due. One command, not one per match: a structured
   * clone pays for every object and property name it carries (mergeTicks).
   */
  | { kind: 'match'; op: 'tick'; matchIds: string[]; due: number }
  | { kind: 'match'; op: 'close'; matchId: string }
  /** A vote the match opened has closed: the script's `vote_resolved` runs. */
  | { kind: 'match'; op: 'vote_resolved'; matchId: string; template: string; result: JsonObject };

export type WorldCommand =
  /** The world's VM, declarations and `init`, then (after a restart) what its snapshot kept. */
  /** `stripes`: lanes the zones spread over, the others already holding the world's stripe ids (decision 0067). */
  | { kind: 'world'; op: 'create'; req: number; worldId: string; mode: ModeInfo; seed: number; recovery: WorldRecovery | null; poses: PoseManifest | null; stripes: number }
  | { kind: 'world'; op: 'join'; req: number; worldId: string; playerId: string; ctx: JsonObject; binary: boolean }
  /** `detach`: the connection went away inside `player_ttl_ms`; the entity stays. */
  | { kind: 'world'; op: 'leave'; req: number; worldId: string; playerId: string; detach: boolean }
  | { kind: 'world'; op: 'input'; worldId: string; playerId: string; input: JsonObject; seq: number | null }
  | { kind: 'world'; op: 'resync'; worldId: string; playerId: string; x: number; y: number; binary: boolean }
  /** `own`: the lane's standby for a tick whose command is late (world-lane.ts), not sent by the main thread. */
  | { kind: 'world'; op: 'tick'; worldId: string; due: number; own?: true }
  | { kind: 'world'; op: 'snapshot'; worldId: string }
  | { kind: 'world'; op: 'close'; worldId: string }
  /** A vote the world asked for closed: it may ask for the next (worlds have no `vote_resolved` callback). */
  | { kind: 'world'; op: 'vote_resolved'; worldId: string }
  /** Either end of the link between a world's home lane and the lane of its stripe `stripe` (ScriptPool.link). */
  | { kind: 'world'; op: 'stripe_link'; worldId: string; stripe: number; port: MessagePort }
  /** To the lane running stripe `stripe` of the world, from its home lane over their link (`close` comes from the main thread). */
  | { kind: 'world'; op: 'stripe'; worldId: string; stripe: number; msg: ToStripe }
  /** To the world's home lane over the link, from the lane running stripe `stripe`. */
  | { kind: 'world'; op: 'stripe_answer'; worldId: string; stripe: number; msg: FromStripe };

/** A `game.<name>` call to the game directory's `rpc.lua` (served by the first lane). */
export type RpcCommand = { kind: 'rpc'; op: 'call'; req: number; method: string; playerId: string; params: JsonObject };

export type Command = MatchCommand | WorldCommand | RpcCommand;
export type LaneKind = Command['kind'];

export type CreateAnswer = { ok: true } | { ok: false };
export type WorldJoinAnswer = JoinResult & { zone?: [number, number] };
export type Answer = CreateAnswer | JoinResult | ScriptRpcResult | WorldJoinAnswer;

/** The engine's own events, whatever kind of script caused them. */
export type LaneWideEvent =
  | { kind: 'lane'; k: 'answer'; req: number; answer: Answer }
  | { kind: 'lane'; k: 'send'; playerId: string; message: JsonValue }
  /** A callback failed on this player's input: `module.error` when development errors are on (host/realtime/live.ts). */
  | { kind: 'lane'; k: 'script_error'; playerId: string; error: ScriptErrorReport }
  | { kind: 'lane'; k: 'log'; level: LogLevel; event: string; fields: LogFields }
  /** Failed Lua callbacks of one batch by reason class, logged or not (the metrics listener counts them). */
  | { kind: 'lane'; k: 'failures'; counts: Partial<Record<FailureKind, number>> };

export type MatchEvent =
  /** A whole `match.<leaf>` frame, ready to write to every player of the match. */
  | { kind: 'match'; k: 'broadcast'; matchId: string; text: string }
  | { kind: 'match'; k: 'joinable'; matchId: string; joinable: boolean }
  /**
   * The `match.state` frames of a batch's ticks, as parallel lists (one
   * object a batch instead of one per match and per view: decision 0075).
   * Match `matchIds[i]` ran `lateMs[i]` after its tick was due and sent the
   * next `counts[i]` of `frames`; frame `j` goes to player `to[j]`, or to
   * the whole roster when that is null (the shared view).
   */
  | { kind: 'match'; k: 'states'; matchIds: string[]; lateMs: number[]; counts: number[]; to: (string | null)[]; frames: string[] }
  /** The tick was a whole period late when its turn came, so it did not run. */
  | { kind: 'match'; k: 'skipped'; matchId: string }
  /** The match has taken more than its share of the lane (fair-share.ts): this tick did not run. */
  | { kind: 'match'; k: 'throttled'; matchId: string; reason: ThrottleReason }
  /** `vote_requested` asked for a vote (the lane asks no more until it hears `vote_resolved`). */
  | { kind: 'match'; k: 'vote'; matchId: string; config: VoteConfig & { vote_id: string } }
  | { kind: 'match'; k: 'finished'; matchId: string; result: JsonObject }
  /** The match's phases moved: the listing form as of that instant (match-phases.ts). */
  | { kind: 'match'; k: 'phase'; matchId: string; phase: JsonObject }
  /** `game.bots.add(name)` / `game.bots.remove(name_or_id)`: the main thread admits or removes the bot. */
  | { kind: 'match'; k: 'bots'; matchId: string; op: 'add' | 'remove'; name: string }
  /** How long the batch's bot `think` calls took: `[bucket, count]` pairs (bot-lane.ts sizes the buckets). */
  | { kind: 'match'; k: 'thinks'; buckets: [number, number][] };

export type WorldEvent =
  /**
   * What one world step (a tick, a join, a leave, a resync) produced. `tick`
   * steps also carry the tick's lateness, how long its steps ran and the
   * bytes of every zone delta it made (whoever watched them).
   */
  | { kind: 'world'; k: 'step'; worldId: string; tick: { lateMs: number; busyMs: number; deltaBytes: number; split: TickSplit; lanes: number[] } | null; out: WorldOutput; phase: JsonObject | null }
  /** `n` ticks (1 when absent) did not run: due while the previous one ran, a whole period late, or never heard of (world-lane.ts). */
  | { kind: 'world'; k: 'skipped'; worldId: string; n?: number }
  | { kind: 'world'; k: 'vote'; worldId: string; config: VoteConfig & { vote_id: string } }
  | { kind: 'world'; k: 'snapshot'; worldId: string; zones: WorldRecovery['zones'] }
  | { kind: 'world'; k: 'finished'; worldId: string; result: JsonObject };

export type LaneEvent = LaneWideEvent | MatchEvent | WorldEvent;

/**
 * Folds `next` into `last`, the lane's last pending command, when both are
 * match ticks of the same slot, so that a slot's ticks on one lane travel as
 * one command; false when they cannot be folded (`next` is then queued).
 */
export function mergeTicks(last: Command, next: Command): boolean {
  if (last.kind !== 'match' || next.kind !== 'match' || last.op !== 'tick' || next.op !== 'tick' || last.due !== next.due) return false;
  for (const id of next.matchIds) last.matchIds.push(id);
  return true;
}
/** The events a subscriber of `kind` receives (answers never leave the pool). */
export type EventOf<K extends LaneEvent['kind']> = Exclude<Extract<LaneEvent, { kind: K }>, { k: 'answer' }>;

/** A synchronous binding call from a worker's script to the main thread. */
export interface BindingCall {
  seq: number;
  /** `['notify']` for `game.notify`, `['economy', 'grant']` for `game.economy.grant`. */
  path: string[];
  args: JsonValue[];
  caller: { matchId: string | null; mode: string | null };
}

export interface BindingAnswer {
  seq: number;
  result: JsonValue;
}

/** Binding names without the functions: what a worker needs to build its `game` table. */
export type BindingShape = Record<string, true | string[]>;

export interface WorkerData {
  /** The game directory, or null for a node without one. */
  gameDir: string | null;
  budgets: Budgets;
  failingTicksMax: number;
  /** This worker serves `rpc.lua`. */
  rpc: boolean;
  rateLimits: Record<RateLimitGroup, RateRule>;
  /** Past this many bytes of heap plus external memory the worker ends itself. */
  memoryBytes: number;
  bindings: BindingShape;
  /** Port the binding calls go out on and their answers come back on. */
  port: MessagePort;
  /**
   * Two Int32s. `ANSWERED`: the main thread sets it to 1 and notifies once an
   * answer is posted. `CLAIM`: the sequence number of the call the worker is
   * waiting on; the main thread swaps it for its negative before an awaited
   * binding commits, the worker for 0 when it stops waiting; whichever swap
   * fails learns the other side's choice.
   */
  signal: SharedArrayBuffer;
}

export const ANSWERED = 0;
export const CLAIM = 1;

/** Exit code of a worker that ended itself over its memory ceiling. */
export const MEMORY_EXIT_CODE = 75;

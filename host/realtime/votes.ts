import type { Ctx } from '../../runtime/contracts/context';
import { FrameError } from '../../runtime/contracts/frame-envelope';
import type { JsonObject, ModeInfo } from '../../runtime/lua/host-interface';
import type { LiveMatchStatus } from '../../runtime/schemas/matches';
import type { WorldStatus } from '../../runtime/schemas/worlds';
import type { voteCast, voteVeto, VoteCast, VoteStatus, VoteVeto } from '../../runtime/schemas/votes';
import { Vote, type VoteConfig, type VoteResult } from '../../runtime/votes/engine';
import { recordVote } from '../../runtime/votes/votes';
import type { FrameHandler, Reply } from './gateway';
import type { Session, SessionRegistry } from './sessions';
import type { ScriptPool } from './lanes/pool';

/** What the votes need of a live match or world. */
export interface VotingMatch {
  readonly id: string;
  readonly status: LiveMatchStatus | WorldStatus;
  readonly roster: ReadonlySet<string>;
  readonly mode: ModeInfo;
}

/** A world's votes push `world.vote_*`, a match's `match.vote_*`. */
function pushPrefix(match: VotingMatch): string {
  return match.mode.kind === 'world' ? 'world' : 'match';
}

interface OpenVote {
  vote: Vote;
  openedAt: Date;
  timer: ReturnType<typeof setTimeout>;
  /** When the timer fires (real time, as the window is). */
  firesAt: number;
}

interface MatchBallots {
  /** A match runs one vote at a time: its lane asks for no other until this one resolves. */
  open: OpenVote | null;
  /** Ids of this match's votes that closed, so a late frame hears `vote_closed`. */
  closed: Set<string>;
  /** Vetoes each player spent in this match (the mode's `veto_tokens` bounds them). */
  vetoesSpent: Map<string, number>;
}

/**
 * The votes of this node's matches and worlds: a `Vote` (runtime/votes/engine.ts) per
 * open vote, the `vote.*` frames, the `match.vote_*` / `world.vote_*` pushes, the close timer,
 * the row written when a vote closes, and the script's `vote_resolved`.
 * Windows run on real time, like the tick wheel.
 */
export class MatchVotes {
  readonly #byMatch = new Map<string, MatchBallots>();

  constructor(
    private readonly ctx: Ctx,
    private readonly sessions: SessionRegistry,
    private readonly pool: ScriptPool,
    /** The match this player is in, if any. */
    private readonly matchOf: (playerId: string) => VotingMatch | undefined,
  ) {}

  /** Where a player in no match votes: its world (the world host registers it). */
  worldOf: (playerId: string) => VotingMatch | undefined = () => undefined;

  // The frame table (frame-table.ts) routes the `vote.*` client frames here.
  readonly castFrame: FrameHandler<typeof voteCast> = (s, p) => this.#cast(s, p);
  readonly vetoFrame: FrameHandler<typeof voteVeto> = (s, p) => this.#veto(s, p);

  /** The match's script asked for a vote: everyone now in the match is eligible. Returns the id it opened under, or null when one was already open. */
  open(match: VotingMatch, config: VoteConfig & { vote_id: string }): string | null {
    const ballots = this.#ballots(match.id);
    if (ballots.open) return null;
    let id = config.vote_id;
    if (ballots.closed.has(id)) {
      this.ctx.log.warn('vote_id_reused', { match_id: match.id, vote_id: id });
      id = this.ctx.ids.uuid();
    }
    const vote = new Vote(id, config, match.roster, Date.now());
    const firesAt = vote.closesAt();
    ballots.open = { vote, openedAt: new Date(this.ctx.clock.now()), firesAt, timer: this.#timer(match, firesAt) };
    this.#toRoster(match, 'vote_start', { vote_id: id, options: config.options, window_ms: config.window_ms, method: config.method });
    return id;
  }

  /** The match ended: a vote still open is cancelled (recorded, never counted). */
  end(match: VotingMatch): void {
    const open = this.#byMatch.get(match.id)?.open;
    this.#byMatch.delete(match.id);
    if (!open) return;
    clearTimeout(open.timer);
    this.#record(match.id, open, 'cancelled', null);
  }

  close(): void {
    for (const b of this.#byMatch.values()) if (b.open) clearTimeout(b.open.timer);
    this.#byMatch.clear();
  }

  // ---- frames ----------------------------------------------------------------

  #cast(session: Session, cast: VoteCast): Reply {
    return this.castBy(session.playerId!, cast);
  }

  /** A cast as `vote.cast` makes it, for a player with no socket (a bot); throws the frame's FrameError. */
  castBy(playerId: string, { vote_id, option_id }: VoteCast): Reply {
    const { match, open } = this.#target(playerId, vote_id);
    const now = Date.now();
    const cast = open.vote.cast(playerId, option_id, now);
    if (!cast.ok) {
      throw new FrameError(cast.reason, cast.reason === 'rate_limited' ? { message: `A vote may be changed ${open.vote.config.max_revotes} times.` } : {});
    }
    if (open.vote.config.visibility === 'live') {
      this.#toRoster(match, 'vote_tally', {
        vote_id,
        tallies: open.vote.tallies(),
        time_remaining_ms: open.vote.timeRemaining(now),
        total_votes: open.vote.totalVotes,
      });
    }
    // ready_up: the last eligible cast brings the close forward.
    const closesAt = open.vote.closesAt();
    if (closesAt < open.firesAt) {
      clearTimeout(open.timer);
      open.firesAt = closesAt;
      open.timer = this.#timer(match, closesAt);
    }
    return { type: 'vote.cast_ok', payload: { success: true } };
  }

  #veto(session: Session, { vote_id }: VoteVeto): Reply {
    const playerId = session.playerId!;
    const { match, open, ballots } = this.#target(playerId, vote_id);
    const spent = ballots.vetoesSpent.get(playerId) ?? 0;
    if (spent >= match.mode.veto_tokens) throw new FrameError('no_veto_tokens', { message: 'No veto tokens left in this match.' });
    const refusal = open.vote.vetoRefusal(playerId, Date.now());
    if (refusal) throw new FrameError(refusal);
    ballots.vetoesSpent.set(playerId, spent + 1);
    clearTimeout(open.timer);
    ballots.open = null;
    ballots.closed.add(vote_id);
    this.#toRoster(match, 'vote_vetoed', { vote_id, vetoed_by: playerId });
    this.#resolved(match, open.vote.config.template, { vote_id, winner: null, status: 'vetoed', vetoed_by: playerId, votes_cast: open.vote.votesCast() });
    this.#record(match.id, open, 'vetoed', null);
    return { type: 'vote.veto_ok', payload: { success: true } };
  }

  /** The open vote a frame names, in the player's match, else its world; the shared checks of both frames. */
  #target(playerId: string, voteId: string): { match: VotingMatch; open: OpenVote; ballots: MatchBallots } {
    const match = this.matchOf(playerId) ?? this.worldOf(playerId);
    if (!match || match.status === 'finished') throw new FrameError('not_in_match');
    const ballots = this.#byMatch.get(match.id);
    const open = ballots?.open;
    if (!ballots || !open || open.vote.id !== voteId) {
      if (ballots?.closed.has(voteId)) throw new FrameError('vote_closed', { message: 'The vote has closed.' });
      throw new FrameError('vote_not_found', { message: 'No open vote with that id in this match.' });
    }
    if (match.status === 'waiting') throw new FrameError('match_not_started');
    if (match.status === 'paused') throw new FrameError('match_paused');
    if (match.status === 'loading') throw new FrameError('world_not_ready');
    return { match, open, ballots };
  }

  // ---- closing -----------------------------------------------------------------

  #timer(match: VotingMatch, at: number): ReturnType<typeof setTimeout> {
    const t = setTimeout(() => this.#resolve(match), Math.max(0, at - Date.now()));
    t.unref();
    return t;
  }

  #resolve(match: VotingMatch): void {
    const ballots = this.#byMatch.get(match.id);
    const open = ballots?.open;
    if (!ballots || !open) return;
    ballots.open = null;
    ballots.closed.add(open.vote.id);
    const result = open.vote.result(Math.random);
    this.#resolved(match, open.vote.config.template, { ...(result as unknown as JsonObject), votes_cast: open.vote.votesCast() });
    // The row first, so a client that reads the vote on hearing its result finds it.
    void this.#record(match.id, open, 'resolved', result).finally(() => {
      const { rounds: _rounds, ...push } = result;
      this.#toRoster(match, 'vote_result', push);
    });
  }

  /** The vote is over: a match's script hears `vote_resolved`; a world may ask for its next. */
  #resolved(match: VotingMatch, template: string, result: JsonObject): void {
    if (match.mode.kind === 'world') this.pool.soon(match.id, { kind: 'world', op: 'vote_resolved', worldId: match.id });
    else this.pool.soon(match.id, { kind: 'match', op: 'vote_resolved', matchId: match.id, template, result });
  }

  #record(matchId: string, open: OpenVote, status: VoteStatus, result: VoteResult | null): Promise<void> {
    return recordVote(this.ctx.db, { vote: open.vote, matchId, status, result, openedAt: open.openedAt, closedAt: new Date(this.ctx.clock.now()) }).catch((err) =>
      this.ctx.log.error('vote_record_failed', { match_id: matchId, vote_id: open.vote.id, error: err }),
    );
  }

  #ballots(matchId: string): MatchBallots {
    let b = this.#byMatch.get(matchId);
    if (!b) this.#byMatch.set(matchId, (b = { open: null, closed: new Set(), vetoesSpent: new Map() }));
    return b;
  }

  #toRoster(match: VotingMatch, leaf: string, payload: object): void {
    const type = `${pushPrefix(match)}.${leaf}`;
    const text = JSON.stringify({ type, payload });
    const sent = this.sessions.metrics.frameOut(type);
    for (const playerId of match.roster) this.sessions.pushText(playerId, text, sent);
  }
}

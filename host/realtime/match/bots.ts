/**
 * The main thread's side of bots in matches: `game.bots.add` / `remove`
 * (match VMs only, asynchronous) carried out after the script's call, the votes bots
 * cast (a random option 1-4 s after `vote_start`), and the think times the
 * lanes report. A bot is a player without a socket: it joins through the
 * same `joinInto` as a human, so the script's `join`, `max_players`, the
 * lock and the roster treat it alike.
 */
import type { Ctx } from '../../../runtime/contracts/context';
import { FrameError } from '../../../runtime/contracts/frame-envelope';
import { botNameOf, isBotId, MAX_BOTS_PER_MATCH, mintBotId } from '../../../runtime/bots/ids';
import type { VoteOption } from '../../../runtime/votes/engine';
import { THINK_BUCKET_MS, THINK_BUCKETS } from './bot-lane';
import type { MatchVotes } from '../votes';
import { BucketHistogram } from '../lanes/histogram';

/** A bot casts this long after `vote_start`, uniformly. */
const VOTE_DELAY_MIN_MS = 1000;
const VOTE_DELAY_MAX_MS = 4000;

/** What bots need of a live match. */
export interface BotMatch {
  readonly id: string;
  readonly status: string;
  readonly roster: ReadonlySet<string>;
  readonly joining: ReadonlyMap<string, unknown>;
  readonly mode: { readonly max_players: number };
}

export interface BotSeats<M extends BotMatch> {
  joinInto(match: M, playerId: string): Promise<unknown>;
  leave(playerId: string): void;
}

export interface ThinkSummary {
  calls: number;
  p50Ms: number;
  p99Ms: number;
}

export class MatchBots<M extends BotMatch> {
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  /** Bots asked for and not yet through `join`, per match: the checks of the next add count them. */
  readonly #adding = new Map<string, Set<string>>();
  readonly #thinks = new BucketHistogram(THINK_BUCKETS);

  constructor(
    private readonly ctx: Ctx,
    private readonly seats: BotSeats<M>,
    private readonly votes: MatchVotes,
  ) {}

  /** What a match script asked for through `game.bots`. */
  request(match: M, op: 'add' | 'remove', name: string): void {
    if (op === 'add') void this.add(match, name);
    else this.remove(match, name);
  }

  /** Admits a bot named `name`; a full match, a duplicate name or the ceiling is a logged no-op. */
  async add(match: M, name: string): Promise<void> {
    if (match.status === 'finished') return;
    let adding = this.#adding.get(match.id);
    if (!adding) this.#adding.set(match.id, (adding = new Set()));
    const bots = new Set([...match.roster, ...match.joining.keys(), ...adding].filter(isBotId));
    let skipped: string | null = null;
    if (bots.size >= MAX_BOTS_PER_MATCH) skipped = 'bot_limit';
    else if ([...bots].some((id) => botNameOf(id) === name)) skipped = 'duplicate';
    else if (match.roster.size + match.joining.size + adding.size >= match.mode.max_players) skipped = 'match_full';
    if (skipped === null) {
      const botId = mintBotId(name);
      adding.add(botId);
      try {
        await this.seats.joinInto(match, botId);
        return;
      } catch (err) {
        skipped = err instanceof FrameError ? err.reason : 'internal';
      } finally {
        adding.delete(botId);
        if (adding.size === 0) this.#adding.delete(match.id);
      }
    }
    this.ctx.log.info('bot_add_skipped', { match_id: match.id, name, reason: skipped });
  }

  /** Removes the bot with that id, or the first with that name; anything else is a no-op. */
  remove(match: M, nameOrId: string): void {
    for (const id of match.roster) {
      if (isBotId(id) && (id === nameOrId || botNameOf(id) === nameOrId)) return this.seats.leave(id);
    }
  }

  /** A vote opened in a match: each bot in it casts a random option 1-4 s later. */
  voteOpened(match: M, voteId: string, options: readonly VoteOption[]): void {
    if (options.length === 0) return;
    for (const botId of match.roster) {
      if (!isBotId(botId)) continue;
      const delay = VOTE_DELAY_MIN_MS + Math.random() * (VOTE_DELAY_MAX_MS - VOTE_DELAY_MIN_MS);
      const t = setTimeout(() => {
        this.#timers.delete(t);
        const option = options[Math.floor(Math.random() * options.length)]!;
        try {
          this.votes.castBy(botId, { vote_id: voteId, option_id: option.id });
        } catch (err) {
          // The vote closed, the bot left, the match ended: the ballot simply is not cast.
          if (!(err instanceof FrameError)) throw err;
        }
      }, delay);
      t.unref();
      this.#timers.add(t);
    }
  }

  /** Think times a lane reported (`[bucket, count]` pairs). */
  recordThinks(buckets: [number, number][]): void {
    for (const [bucket, count] of buckets) this.#thinks.add(bucket, count);
  }

  /** Script `think` calls since the last reset (fallback decisions are not calls), for the benchmark and operators. */
  thinkSummary(): ThinkSummary {
    // A bucket's upper edge, in ms.
    const at = (q: number) => Number(((this.#thinks.quantileBucket(q) + 1) * THINK_BUCKET_MS).toFixed(1));
    return { calls: this.#thinks.count, p50Ms: at(0.5), p99Ms: at(0.99) };
  }

  resetThinks(): void {
    this.#thinks.reset();
  }

  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}

import type { Settings } from '../contracts/settings';
import type { EntryRow, LeaderboardObserver, NodeLeaderboards, Standing } from '../contracts/services';
import { Board, isPlayerId, type BoardRules } from './board';

type LeaderboardSettings = Pick<Settings, 'leaderboards' | 'leaderboard_max_boards' | 'leaderboard_client_submit'>;

const DEFAULT_RULES: BoardRules = { order: 'desc', operator: 'best' };

/**
 * This node's boards (held in this node's memory). A board opens
 * on its first submission, with the rules the `leaderboards` setting gives
 * its id (highest score first, best score kept, by default); reads never
 * open one. REST, game scripts and the flush job all go through here.
 */
export class Leaderboards implements NodeLeaderboards {
  readonly #boards = new Map<string, Board>();
  observer: LeaderboardObserver | null = null;

  constructor(private readonly settings: LeaderboardSettings) {}

  /** Whether players may submit to the board over REST (scripts always may). */
  clientMaySubmit(boardId: string): boolean {
    const allowed = this.settings.leaderboard_client_submit;
    return allowed === 'all' || allowed.includes(boardId);
  }

  /** Applies a score under the board's operator; null when the board does not exist and the node holds its maximum of boards. */
  submit(boardId: string, playerId: string, score: bigint, subScore: bigint, now: number): Standing | null {
    const id = playerId.toLowerCase();
    const standing = this.#open(boardId)?.submit(id, score, subScore, now) ?? null;
    if (standing) this.observer?.submitted(boardId, id, score, subScore, now);
    return standing;
  }

  /**
   * A submission another node made, applied here so every node's board
   * holds the same entries. `set` keeps the later of two submissions (by the
   * submitting nodes' clocks; the higher score on a tie), so nodes that see
   * two of them in different orders still agree; `best` and `incr` agree in
   * any order.
   */
  applyRemote(boardId: string, playerId: string, score: bigint, subScore: bigint, at: number): void {
    const board = this.#open(boardId);
    if (!board) return;
    if (board.rules.operator === 'set') {
      const held = board.get(playerId);
      if (held && (at < held.updatedAt || (at === held.updatedAt && score <= held.score))) return;
    }
    board.submit(playerId, score, subScore, at);
  }

  top(boardId: string, count: number): Standing[] {
    return this.#boards.get(boardId)?.top(count) ?? [];
  }

  around(boardId: string, playerId: string, range: number): Standing[] {
    return this.#boards.get(boardId)?.around(playerId, range) ?? [];
  }

  /** The player's entry with its rank, or null. */
  standing(boardId: string, playerId: string): Standing | null {
    return this.#boards.get(boardId)?.get(playerId) ?? null;
  }

  /** Drops the player from every board (after an erasure committed). */
  erase(playerId: string): void {
    this.eraseHere(playerId);
    this.observer?.erased(playerId);
  }

  /** Drops the player from this node's boards only (an erasure another node made). */
  eraseHere(playerId: string): void {
    for (const board of this.#boards.values()) board.remove(playerId);
  }

  /** A stored entry back in its board at boot; stored boards open whatever the maximum. */
  load(boardId: string, row: EntryRow): void {
    if (!isPlayerId(row.playerId)) return;
    let board = this.#boards.get(boardId);
    if (!board) this.#boards.set(boardId, (board = new Board(boardId, this.#rules(boardId))));
    board.load(row);
  }

  boards(): IterableIterator<Board> {
    return this.#boards.values();
  }

  #open(boardId: string): Board | null {
    let board = this.#boards.get(boardId);
    if (board) return board;
    if (this.#boards.size >= this.settings.leaderboard_max_boards) return null;
    this.#boards.set(boardId, (board = new Board(boardId, this.#rules(boardId))));
    return board;
  }

  #rules(boardId: string): BoardRules {
    return this.settings.leaderboards[boardId] ?? DEFAULT_RULES;
  }
}

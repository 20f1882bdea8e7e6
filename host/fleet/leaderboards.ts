import { randomBytes } from 'node:crypto';
import type { NodeLeaderboards } from '../../runtime/contracts/services';
import type { Logger } from '../../runtime/platform/log';
import type { Bus } from './bus';
import type { FleetPresence } from './fleet-presence';

/** A change on the bus: `s` numbers the changes of the node that made it. */
type Change = { s: number; b: string; p: string; v: string; u: string; t: number } | { s: number; e: string };

interface Snapshot {
  /** Per node, the last change of theirs the snapshot holds. */
  seen: Record<string, number>;
  boards: { id: string; entries: [string, string, string, number][] }[];
}

/** How long a joining node waits for a peer's copy before it reads the table instead. */
const SNAPSHOT_WAIT_MS = 10_000;

/**
 * Every node holds every board (decision 0041 gives the measurements that
 * chose this over Redis sorted sets): a submission or an erasure is made
 * where it arrives, at once (game scripts read their own writes
 * synchronously), and published; every other node makes it on arrival.
 * `best` and `incr` agree in any order, `set` keeps the later submission.
 *
 * Each node numbers its own changes, and each node remembers the last
 * number it applied per node. A node that joins a running fleet asks one
 * peer for a copy of its boards together with those numbers, and then
 * applies, of what it heard meanwhile, only the changes the copy does not
 * hold: nothing is counted twice, nothing is missed. Only one node (the
 * alive node whose id sorts first) writes the table on the flush interval,
 * so writers never race; the others keep their changed marks and write
 * everything if they become that node.
 */
export class FleetLeaderboards {
  #seq = 0;
  readonly #seen = new Map<string, number>();
  /** Changes heard before this node's boards are loaded; null once they are. */
  #held: { change: Change; from: string }[] | null;
  readonly #waiting = new Map<string, (found: boolean) => void>();

  constructor(
    private readonly bus: Bus,
    private readonly boards: NodeLeaderboards,
    private readonly presence: FleetPresence,
    private readonly log: Logger,
  ) {
    this.#held = bus.redis ? [] : null;
    if (!bus.redis) return;
    boards.observer = {
      submitted: (b, p, score, sub, now) => this.#publish({ s: 0, b, p, v: score.toString(), u: sub.toString(), t: now }),
      erased: (playerId) => this.#publish({ s: 0, e: playerId }),
    };
    bus.on('lb', (change: Change, from) => {
      if (from === bus.nodeId) return;
      if (this.#held) this.#held.push({ change, from });
      else this.#apply(change, from);
    });
    bus.on('lb_copy', (m: { to: string; id: string }) => {
      if (m.to === bus.nodeId) void this.#copy(m.id);
    });
    bus.on('lb_copied', (m: { id: string }) => this.#waiting.get(m.id)?.(true));
  }

  /** Whether this node writes the boards to the table (one node of the fleet does). */
  flushes(): boolean {
    if (!this.bus.redis) return true;
    const first = [...this.presence.alive()].sort()[0];
    return first === undefined || first === this.bus.nodeId;
  }

  /**
   * Boot: takes a live peer's copy of the boards. Answers false when there is
   * no peer (or none answered in time): the caller then reads the table, and
   * calls `loaded()` after.
   */
  async join(): Promise<boolean> {
    if (!this.bus.redis) return false;
    const peers = [...(await this.presence.aliveNodes())].filter((n) => n !== this.bus.nodeId).sort();
    if (peers.length === 0) return false;
    const id = randomBytes(8).toString('hex');
    const answered = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), SNAPSHOT_WAIT_MS);
      this.#waiting.set(id, (found) => (clearTimeout(timer), resolve(found)));
      this.bus.publish('lb_copy', { to: peers[0], id });
    });
    this.#waiting.delete(id);
    const text = answered ? await this.bus.redis.get(this.#copyKey(id)) : null;
    if (text === null) {
      this.log.warn('fleet_leaderboards_copy_missing', { peer: peers[0] });
      return false;
    }
    const copy = JSON.parse(text) as Snapshot;
    let entries = 0;
    for (const board of copy.boards) {
      for (const [playerId, score, sub, at] of board.entries) {
        this.boards.load(board.id, { playerId, score: BigInt(score), subScore: BigInt(sub), updatedAt: at });
        entries++;
      }
    }
    for (const [node, s] of Object.entries(copy.seen)) this.#seen.set(node, s);
    this.log.info('leaderboards_copied', { peer: peers[0], entries });
    this.loaded();
    return true;
  }

  /** The boards are loaded: what was heard meanwhile is applied, unless already held. */
  loaded(): void {
    const held = this.#held;
    this.#held = null;
    for (const { change, from } of held ?? []) this.#apply(change, from);
  }

  #publish(change: Change): void {
    change.s = ++this.#seq;
    this.bus.publish('lb', change);
  }

  #apply(change: Change, from: string): void {
    if (change.s <= (this.#seen.get(from) ?? 0)) return;
    this.#seen.set(from, change.s);
    if ('e' in change) this.boards.eraseHere(change.e);
    else this.boards.applyRemote(change.b, change.p, BigInt(change.v), BigInt(change.u), change.t);
  }

  #copyKey(id: string): string {
    return `${this.bus.prefix}lbcopy:${id}`;
  }

  /** A joining node asked this one for its boards: written in one step, so the copy and the numbers agree. */
  async #copy(id: string): Promise<void> {
    const seen: Record<string, number> = Object.fromEntries(this.#seen);
    seen[this.bus.nodeId] = this.#seq;
    const boards: Snapshot['boards'] = [];
    for (const board of this.boards.boards()) {
      const entries: Snapshot['boards'][number]['entries'] = [];
      for (const e of board.entries()) entries.push([e.playerId, e.score.toString(), e.subScore.toString(), e.updatedAt]);
      boards.push({ id: board.id, entries });
    }
    try {
      await this.bus.redis!.set(this.#copyKey(id), JSON.stringify({ seen, boards } satisfies Snapshot), 'PX', 60_000);
      this.bus.publish('lb_copied', { id });
    } catch (err) {
      this.log.warn('fleet_leaderboards_copy_failed', { error: (err as Error).message });
    }
  }
}

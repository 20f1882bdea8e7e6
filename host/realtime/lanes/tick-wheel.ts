/**
 * The one clock of the script lanes: every match and every world ticks on
 * this wheel, each at its own period, and after each slot every lane's
 * batch goes out (inputs and ticks together, one message per lane).
 */

/** The match tick is fixed: ten ticks a second. It is also one turn of the wheel. */
export const TICK_MS = 100;

/** What ticks on the wheel. */
export interface Ticking {
  /** Milliseconds between two ticks; rounded up to whole slots. */
  readonly period: number;
  /** Its tick is due at `due` (epoch ms, the slot's time). */
  tick(due: number): void;
  /** The wheel fell a whole turn behind and dropped `turns` of its passes. */
  skipped(turns: number): void;
}

interface Entry {
  readonly item: Ticking;
  /** Its period in whole slots. */
  readonly slots: number;
  slot: number;
  /** It ticks at the first pass of its slot at or after this instant. */
  earliest: number;
}

/** A place on the wheel: `remove` takes it off. */
export interface WheelPlace {
  remove(): void;
}

/**
 * 100 slots of 1 ms make one 100 ms turn. An item lives in one slot and
 * ticks when the wheel passes it, so a thousand matches cost one timer; an
 * item whose period is not one turn moves to the slot of its next tick
 * after each tick (a shorter period ticks several times a turn, a longer one
 * sits out the passes before it is due). With worker lanes, an item whose
 * period is a whole number of GRID slots (a match's 100 ms, a world's 50)
 * lives only on slots that are multiples of GRID, so the items of a turn
 * share a fifth of its slots and each lane's batch carries five times as
 * many ticks. The timer wakes only for slots that hold something. The wheel
 * passes one slot per event-loop turn, so sockets and HTTP are served
 * between slots however far behind it is; behind by a whole turn, it drops
 * the missed passes (every item hears how many) instead of running them
 * back to back.
 */
export class TickWheel {
  static readonly SLOTS = 100;
  static readonly SLOT_MS = TICK_MS / TickWheel.SLOTS;
  /**
   * Every wake-up of the main thread and of a script worker costs the same
   * whatever its batch holds (decision 0069): 5 ms of grid makes 200 batches
   * a second per lane instead of up to 1,000, and adds no lateness (an item
   * is due at its own slot's time).
   */
  static readonly GRID = 5;
  readonly #slots: Set<Entry>[] = Array.from({ length: TickWheel.SLOTS }, () => new Set<Entry>());
  #cursor = 0;
  #cursorAt = 0;
  #timer: { cancel(): void } | null = null;
  /** The slot the timer is set for. */
  #target = 0;
  #count = 0;

  constructor(
    private readonly now: () => number,
    /** After each slot: the batch of that slot goes out. */
    private readonly afterSlot: () => void,
    /**
     * TickWheel.GRID when the ticks run on worker lanes; 1 (every slot) when
     * they run on the main thread, where a slot's ticks hold up sockets and
     * HTTP while they run, so they are spread as finely as the wheel allows.
     */
    private readonly grid: number = TickWheel.GRID,
  ) {}

  /**
   * The first tick comes one period after `add`: the item sits out its
   * slot's passes until then. Of the slots holding at most one item more
   * than the emptiest, it takes the one turning soonest, so a steady trickle
   * of new matches starts one period (and a few ms) after they were made,
   * and a burst is spread over the whole turn instead of piling into a few
   * slots (its later items start up to one turn later).
   */
  add(item: Ticking): WheelPlace {
    if (this.#count++ === 0) this.#start();
    else this.#catchUp();
    const slots = Math.max(1, Math.ceil(item.period / TickWheel.SLOT_MS));
    const step = slots % this.grid === 0 ? this.grid : 1;
    let least = Infinity;
    for (let i = 0; i < TickWheel.SLOTS; i += step) least = Math.min(least, this.#slots[i]!.size);
    let chosen = this.#cursor;
    for (let k = 0; k < TickWheel.SLOTS; k++) {
      const i = (this.#cursor + k) % TickWheel.SLOTS;
      if (i % step === 0 && this.#slots[i]!.size <= least + 1) {
        chosen = i;
        break;
      }
    }
    const entry: Entry = { item, slots, slot: chosen, earliest: this.now() + slots * TickWheel.SLOT_MS - TickWheel.SLOT_MS };
    this.#slots[chosen]!.add(entry);
    // The timer may be set for a later slot than this one: an item due within the turn must not be passed over.
    if (this.#timer !== null && this.#ahead(chosen) < this.#ahead(this.#target)) this.#arm();
    let placed = true;
    return {
      remove: () => {
        if (!placed) return;
        placed = false;
        if (this.#slots[entry.slot]!.delete(entry) && --this.#count === 0) this.#stop();
      },
    };
  }

  /** While the timer sleeps the cursor stays where it was set from: it moves up to now over the slots the timer skips (all empty). */
  #catchUp(): void {
    const now = this.now();
    while (this.#cursor !== this.#target && this.#cursorAt < now) {
      this.#cursor = (this.#cursor + 1) % TickWheel.SLOTS;
      this.#cursorAt += TickWheel.SLOT_MS;
    }
  }

  /** Slots from the cursor to slot `i`, going forward. */
  #ahead(i: number): number {
    return (i - this.#cursor + TickWheel.SLOTS) % TickWheel.SLOTS;
  }

  #start(): void {
    this.#cursorAt = this.now() + TickWheel.SLOT_MS;
    this.#arm();
  }

  #stop(): void {
    this.#timer?.cancel();
    this.#timer = null;
  }

  /** Sets the timer for the next slot that holds an item, the cursor moving over the empty ones. */
  #arm(): void {
    this.#timer?.cancel();
    let skip = 0;
    while (skip < TickWheel.SLOTS - 1 && this.#slots[(this.#cursor + skip) % TickWheel.SLOTS]!.size === 0) skip++;
    this.#target = (this.#cursor + skip) % TickWheel.SLOTS;
    const wait = this.#cursorAt + skip * TickWheel.SLOT_MS - this.now();
    if (wait > 0) {
      const t = setTimeout(() => this.#turn(), wait);
      this.#timer = { cancel: () => clearTimeout(t) };
    } else {
      // Overdue: still let the event loop serve I/O before the next slot.
      const t = setImmediate(() => this.#turn());
      this.#timer = { cancel: () => clearImmediate(t) };
    }
  }

  #turn(): void {
    this.#timer = null;
    if (this.#count === 0) return;
    // Over the empty slots the timer skipped.
    this.#cursorAt += this.#ahead(this.#target) * TickWheel.SLOT_MS;
    this.#cursor = this.#target;
    const behind = this.now() - this.#cursorAt;
    if (behind >= TICK_MS) {
      const turns = Math.floor(behind / TICK_MS);
      for (const slot of this.#slots) for (const e of slot) e.item.skipped(turns);
      this.#cursorAt += turns * TICK_MS;
    }
    const due = this.#cursorAt;
    const here = this.#slots[this.#cursor]!;
    for (const e of [...here]) {
      if (due < e.earliest) continue;
      e.earliest = due + e.slots * TickWheel.SLOT_MS - TickWheel.SLOT_MS;
      // A period of whole turns keeps its slot; any other moves to the slot of its next tick.
      if (e.slots % TickWheel.SLOTS !== 0) {
        here.delete(e);
        e.slot = (this.#cursor + e.slots) % TickWheel.SLOTS;
        this.#slots[e.slot]!.add(e);
      }
      e.item.tick(due);
    }
    this.afterSlot();
    this.#cursor = (this.#cursor + 1) % TickWheel.SLOTS;
    this.#cursorAt += TickWheel.SLOT_MS;
    if (this.#count > 0) this.#arm();
  }

  close(): void {
    this.#stop();
    for (const s of this.#slots) s.clear();
    this.#count = 0;
  }
}

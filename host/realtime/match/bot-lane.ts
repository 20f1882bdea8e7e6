/**
 * The bots of one script lane: after each tick of a match, every bot in it
 * thinks on the view the match made for it, and what it decides is queued
 * as its input for the next tick, exactly where a human's input would be.
 * Bots hold no socket, so their views never leave the lane.
 *
 * One bot VM per bot script per lane (runtime/lua/bot.ts says why that is
 * safe). A `think` that fails, or a bot with no script, falls back to the
 * built-in AI; a `think` stopped by a limit also benches its bot's script
 * for a while (doubling up to a minute), so a hostile script costs the
 * lane one budget per bench period, and only its own bot plays worse.
 */
import type { Budgets, JsonObject, ScriptServices, ScriptSource } from '../../../runtime/lua/host-interface';
import { isLimitKind } from '../../../runtime/lua/host-interface';
import { BotVm } from '../../../runtime/lua/bot';
import { boonPick, builtInThink } from '../../../runtime/bots/ai';

/** The fallback is logged at most this often per bot. */
const FALLBACK_LOG_MS = 60_000;
const BENCH_FIRST_MS = 1000;
const BENCH_MAX_MS = 60_000;
/** Think times are counted in buckets of this many ms, up to the think budget and one bucket beyond. */
export const THINK_BUCKET_MS = 0.1;
export const THINK_BUCKETS = 502;

interface LaneBot {
  /** Null: the mode names no bot script (a bot `game.bots.add` made in a mode without one). */
  script: string | null;
  /** No script call before this instant (epoch ms). */
  benchedUntil: number;
  benchMs: number;
  fallbackLoggedAt: number;
}

export interface LaneBotOptions {
  source: ScriptSource;
  budgets: Budgets;
  services: ScriptServices;
}

export class LaneBots {
  readonly #byMatch = new Map<string, Map<string, LaneBot>>();
  /** Per script: its VM, or the revision at which it failed to load (retried when the file changes). */
  readonly #vms = new Map<string, BotVm | { failedAt: number; error: string }>();
  /** Think durations since the last `takeThinks`, in THINK_BUCKET_MS buckets. */
  #thinks: Uint32Array | null = null;
  /** The last view text parsed, and what it parsed to: with a shared view every bot of a match gets the same text. */
  #lastText = '';
  #lastView: JsonObject = {};

  constructor(private readonly options: LaneBotOptions) {}

  join(matchId: string, botId: string, script: string | null): void {
    let bots = this.#byMatch.get(matchId);
    if (!bots) this.#byMatch.set(matchId, (bots = new Map()));
    bots.set(botId, { script, benchedUntil: 0, benchMs: 0, fallbackLoggedAt: -Infinity });
  }

  leave(matchId: string, botId: string): void {
    const bots = this.#byMatch.get(matchId);
    bots?.delete(botId);
    if (bots?.size === 0) this.#byMatch.delete(matchId);
  }

  close(matchId: string): void {
    this.#byMatch.delete(matchId);
  }

  drives(matchId: string, playerId: string): boolean {
    return this.#byMatch.get(matchId)?.has(playerId) ?? false;
  }

  /** The bot's next input from the view its match made for it this tick (JSON text), or null for none. */
  think(matchId: string, botId: string, viewText: string): JsonObject | null {
    const bot = this.#byMatch.get(matchId)?.get(botId);
    if (!bot) return null;
    // Nothing below writes to the view (pushJson and the built-in AI only read it), so bots may share one parse.
    if (viewText !== this.#lastText) {
      this.#lastView = JSON.parse(viewText) as JsonObject;
      this.#lastText = viewText;
    }
    const view = this.#lastView;
    const pick = boonPick(view);
    if (pick) return pick;
    let why = 'no_script';
    if (bot.script !== null) {
      const now = Date.now();
      const vm = now < bot.benchedUntil ? null : this.#vm(bot.script);
      if (vm instanceof BotVm) {
        const t0 = performance.now();
        const out = vm.think(botId, view);
        this.#count(performance.now() - t0);
        if (out.ok) {
          bot.benchMs = 0;
          return out.input;
        }
        why = `${out.kind}: ${out.message.slice(0, 200)}`;
        if (isLimitKind(out.kind)) {
          bot.benchMs = Math.min(BENCH_MAX_MS, bot.benchMs === 0 ? BENCH_FIRST_MS : bot.benchMs * 2);
          bot.benchedUntil = now + bot.benchMs;
        }
      } else {
        why = now < bot.benchedUntil ? 'benched after a limit' : `script not loaded: ${(vm as { error: string }).error.slice(0, 200)}`;
      }
    }
    this.#fallbackLog(matchId, botId, bot, why);
    return builtInThink(botId, view);
  }

  /** Think-time buckets counted since the last call, or null when no bot script ran. */
  takeThinks(): Uint32Array | null {
    const out = this.#thinks;
    this.#thinks = null;
    return out;
  }

  closeAll(): void {
    for (const vm of this.#vms.values()) if (vm instanceof BotVm) vm.close();
    this.#vms.clear();
    this.#byMatch.clear();
  }

  #vm(script: string): BotVm | { failedAt: number; error: string } {
    const revision = this.options.source.revision?.(script) ?? 0;
    const known = this.#vms.get(script);
    if (known instanceof BotVm) {
      if (known.changed) known.refresh();
      return known;
    }
    if (known && known.failedAt === revision) return known;
    try {
      const vm = BotVm.create({
        source: this.options.source,
        script,
        services: this.options.services,
        instructions: this.options.budgets.light,
        heapBytes: this.options.budgets.heapBytes,
      });
      this.#vms.set(script, vm);
      return vm;
    } catch (err) {
      const failed = { failedAt: revision, error: (err as Error).message };
      this.#vms.set(script, failed);
      return failed;
    }
  }

  #fallbackLog(matchId: string, botId: string, bot: LaneBot, reason: string): void {
    const now = Date.now();
    if (now - bot.fallbackLoggedAt < FALLBACK_LOG_MS) return;
    bot.fallbackLoggedAt = now;
    this.options.services.log.warn('bot_fallback_ai', { match_id: matchId, bot_id: botId, script: bot.script, reason });
  }

  #count(ms: number): void {
    const buckets = (this.#thinks ??= new Uint32Array(THINK_BUCKETS));
    buckets[Math.min(THINK_BUCKETS - 1, Math.floor(ms / THINK_BUCKET_MS))]!++;
  }
}

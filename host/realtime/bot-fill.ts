/**
 * Queue fill: every `matchmaker_bot_fill_ms` (8 s by
 * default), each match mode with enabled bots and at least one person
 * waiting gets bot tickets for the gap between its queue and the bots'
 * `min_players`. The tickets are ordinary ones, so the mode's strategy
 * groups bots as it groups people; under `skill_based` a bot takes the
 * skill of the person it was added for. Bot tickets left in a queue that
 * no person waits in any more are withdrawn.
 */
import type { Ctx } from '../../runtime/contracts/context';
import type { ModeInfo } from '../../runtime/lua/host-interface';
import { botNameOf, isBotId, mintBotId } from '../../runtime/bots/ids';
import type { Matchmaker } from './matchmaker';

export class BotFill {
  #timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly ctx: Ctx,
    private readonly matchmaker: Matchmaker,
    private readonly modes: () => Iterable<ModeInfo>,
  ) {}

  start(): void {
    this.#timer = setInterval(() => this.pass(), this.ctx.settings.matchmaker_bot_fill_ms);
    this.#timer.unref();
  }

  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  pass(): void {
    for (const mode of this.modes()) {
      const bots = mode.bots;
      if (mode.kind !== 'match' || !bots) continue;
      const queue = this.matchmaker.queued(mode.name);
      const people = queue.filter((t) => !isBotId(t.playerId));
      if (people.length === 0 || !bots.enabled) {
        this.#withdraw(mode.name);
        continue;
      }
      const skill = people[0]!.properties.skill;
      const properties = typeof skill === 'number' && Number.isInteger(skill) ? { skill } : {};
      // Names not already waiting come first, so a group rarely holds two bots of one name.
      const taken = new Set(queue.map((t) => botNameOf(t.playerId)));
      const start = Math.floor(Math.random() * bots.names.length);
      const rotated = bots.names.map((_, i) => bots.names[(start + i) % bots.names.length]!);
      const order = [...rotated.filter((n) => !taken.has(n)), ...rotated.filter((n) => taken.has(n))];
      for (let i = 0; i < bots.min_players - queue.length; i++) {
        const botId = mintBotId(order[i % order.length]!);
        try {
          this.matchmaker.add(botId, mode.name, properties);
        } catch (err) {
          // A full queue or a mode gone in a rescan: people come first, so no bot ticket.
          this.ctx.log.info('bot_fill_skipped', { mode: mode.name, error: err instanceof Error ? err.message : String(err) });
          break;
        }
      }
    }
  }

  /** The bot tickets waiting in the mode's queue (the matchmaker is node-local, and only this fill queues bots). */
  #withdraw(mode: string): void {
    // A copy: removing a ticket takes it out of the queue being read.
    for (const t of [...this.matchmaker.queued(mode)]) if (isBotId(t.playerId)) this.matchmaker.remove(t.playerId, t.id);
  }
}

/**
 * What a bot does without a working script (no script, one that does not load, a failing `think`): the built-in
 * AI, and the boon pick every bot makes on its own. Both read only the view
 * the match sends that bot, like a client would.
 */
import type { JsonObject, JsonValue } from '../contracts/json';

interface Body {
  id: string;
  x: number;
  y: number;
  alive: boolean;
}

/**
 * `state.phase == "boon_pick"` with offers: the input that takes the first
 * one (`boon_id` is the offer's `id`, or the offer itself when it is a plain
 * value). Null otherwise.
 */
export function boonPick(view: JsonObject): JsonObject | null {
  if (view.phase !== 'boon_pick' || !Array.isArray(view.boon_offers) || view.boon_offers.length === 0) return null;
  const first = view.boon_offers[0]!;
  const id = first !== null && typeof first === 'object' && !Array.isArray(first) && first.id !== undefined ? first.id : first;
  return { type: 'boon_pick', boon_id: id };
}

/**
 * The built-in AI: it finds itself and the nearest living other player in
 * `players` (a map by id or a list of entries with `id`, each with numeric
 * `x`, `y` and optionally `hp`) and steps toward it one unit per axis
 * (`{dx, dy, target}`); with nobody to chase it wanders (`{dx, dy}`).
 */
export function builtInThink(botId: string, view: JsonObject, random: () => number = Math.random): JsonObject {
  const bodies = bodiesOf(view.players);
  const self = bodies.find((b) => b.id === botId);
  if (self) {
    let best: Body | null = null;
    let bestDistance = Infinity;
    for (const b of bodies) {
      if (b.id === botId || !b.alive) continue;
      const d = Math.abs(b.x - self.x) + Math.abs(b.y - self.y);
      if (d < bestDistance) {
        best = b;
        bestDistance = d;
      }
    }
    if (best) return { dx: Math.sign(best.x - self.x), dy: Math.sign(best.y - self.y), target: best.id };
  }
  return { dx: Math.floor(random() * 3) - 1, dy: Math.floor(random() * 3) - 1 };
}

function bodiesOf(players: JsonValue | undefined): Body[] {
  if (players === null || typeof players !== 'object') return [];
  const entries: [string, JsonValue][] = Array.isArray(players)
    ? players.flatMap((p): [string, JsonValue][] => (p !== null && typeof p === 'object' && !Array.isArray(p) && typeof p.id === 'string' ? [[p.id, p]] : []))
    : Object.entries(players);
  const bodies: Body[] = [];
  for (const [id, p] of entries) {
    if (p === null || typeof p !== 'object' || Array.isArray(p)) continue;
    if (typeof p.x !== 'number' || typeof p.y !== 'number') continue;
    bodies.push({ id, x: p.x, y: p.y, alive: typeof p.hp !== 'number' || p.hp > 0 });
  }
  return bodies;
}

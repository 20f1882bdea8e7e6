/** The demo arena's view of a match, as arena.lua's `get_state` sends it. */
export interface ArenaView {
  tick: number;
  you: string;
  coin: { x: number; y: number };
  players: Record<string, { x: number; y: number; score: number }>;
}

export const GRID = 20;

/** Reads a `match.state` payload as the arena's view; null when it is not one. */
export function arenaView(payload: Record<string, unknown>): ArenaView | null {
  const coin = payload.coin as ArenaView['coin'] | undefined;
  const players = payload.players as ArenaView['players'] | undefined;
  if (typeof payload.you !== 'string' || !coin || typeof coin.x !== 'number' || !players || typeof players !== 'object') return null;
  return { tick: Number(payload.tick) || 0, you: payload.you, coin, players };
}

/** Draws the grid, the coin and both players on a canvas, scaled for the screen's pixel density. */
export class ArenaBoard {
  readonly #canvas: HTMLCanvasElement;
  readonly #context: CanvasRenderingContext2D;
  readonly #colours: { you: string; them: string; coin: string; line: string };

  constructor(canvas: HTMLCanvasElement) {
    this.#canvas = canvas;
    this.#context = canvas.getContext('2d')!;
    const style = getComputedStyle(document.documentElement);
    const colour = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
    this.#colours = { you: colour('--you', '#4da3ff'), them: colour('--them', '#ff8a3d'), coin: colour('--coin', '#ffd43b'), line: colour('--line', '#2a3550') };
  }

  draw(view: ArenaView | null): void {
    const canvas = this.#canvas;
    const ratio = window.devicePixelRatio || 1;
    const size = Math.round((canvas.clientWidth || 480) * ratio);
    if (canvas.width !== size) canvas.width = canvas.height = size;
    const ctx = this.#context;
    const cell = size / GRID;
    ctx.clearRect(0, 0, size, size);
    ctx.strokeStyle = this.#colours.line;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 1; i < GRID; i++) {
      const at = Math.round(i * cell) + 0.5;
      ctx.moveTo(at, 0);
      ctx.lineTo(at, size);
      ctx.moveTo(0, at);
      ctx.lineTo(size, at);
    }
    ctx.stroke();
    if (!view) return;

    ctx.fillStyle = this.#colours.coin;
    ctx.beginPath();
    ctx.arc((view.coin.x + 0.5) * cell, (view.coin.y + 0.5) * cell, cell * 0.3, 0, Math.PI * 2);
    ctx.fill();

    for (const [id, p] of Object.entries(view.players)) {
      ctx.fillStyle = id === view.you ? this.#colours.you : this.#colours.them;
      const inset = cell * 0.12;
      ctx.beginPath();
      ctx.roundRect(p.x * cell + inset, p.y * cell + inset, cell - inset * 2, cell - inset * 2, cell * 0.2);
      ctx.fill();
    }
  }
}

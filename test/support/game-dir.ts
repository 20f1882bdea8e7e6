import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A throwaway game directory: `files` maps relative paths to Lua source. */
export function gameDir(files: Record<string, string>): { dir: string; write(file: string, text: string): void; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-game-'));
  const write = (file: string, text: string) => writeFileSync(path.join(dir, file), text);
  for (const [file, text] of Object.entries(files)) write(file, text);
  return { dir, write, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A minimal well-behaved match script; `extra` is appended (and may redefine callbacks). */
export function matchScript(globals: string, extra = ''): string {
  return `${globals}
function init(config) return { tick = 0, inputs = {}, match_id = config.match_id } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state)
  state.inputs[#state.inputs + 1] = input.n
  return state
end
function tick(state) state.tick = state.tick + 1 return state end
function get_state(player_id, state) return { tick = state.tick, inputs = state.inputs } end
${extra}
`;
}

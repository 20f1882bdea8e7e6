/**
 * A bot script's VM: `think(bot_id, state)`, called after every tick with the bot's view, returns the
 * bot's next input. There is no `game` table, `require` is rooted at the
 * bot script's directory, and whatever a `think` call writes to what the
 * script holds between calls (globals, module-level locals, the tables they
 * reach) is put back after the call, as the reference says: a snapshot
 * taken once the body has run, leaving out the sandbox's own library,
 * written back after every think (snapshot.ts). Since no call can leave
 * anything behind, one VM serves every bot that runs the script in a lane:
 * the bots differ only in the id and view each call gets.
 */
import { DEFAULT_BUDGETS, type FailureKind, type JsonObject, type ScriptServices, type ScriptSource } from './host-interface';
import { ScriptInstance } from './instance';
import { isObjectJson, MarshalError, pushJson, stringObject, toJson } from './marshal';
import { SNAPSHOT_MAX_ENTRIES, VmSnapshot, type Reached } from './snapshot';
import { lua, MODULE_CACHE, to_luastring } from './vm';

/** Wall-clock budget of one `think`: 50 ms. */
export const THINK_MS = 50;

const THINK = stringObject('think');
const TOO_BIG = `the bot script holds over ${SNAPSHOT_MAX_ENTRIES} table entries and upvalues, too many to put back after each think`;

export type ThinkResult =
  /** `input` null: the script had nothing to send this time (it returned nil). */
  | { ok: true; input: JsonObject | null }
  | { ok: false; kind: FailureKind; message: string };

export interface BotVmOptions {
  source: ScriptSource;
  /** The bot script, relative to the game directory. */
  script: string;
  services: ScriptServices;
  /** Instructions one `think` may run (the node's light budget). */
  instructions?: number;
  heapBytes?: number;
}

export class BotVm extends ScriptInstance<'think'> {
  readonly script: string;
  readonly #instructions: number;
  /** What existed before the body ran (the sandbox's library), which the snapshot leaves out. */
  #library: Reached | null = null;
  /** What the script holds once its body has run; null when it holds too much to copy. */
  #snapshot: VmSnapshot | null = null;

  private constructor(options: BotVmOptions) {
    super({
      source: options.source,
      file: options.script,
      services: options.services,
      budgets: { heapBytes: options.heapBytes ?? DEFAULT_BUDGETS.heapBytes },
      logFields: { bot_script: options.script },
    });
    this.script = options.script;
    this.#instructions = options.instructions ?? DEFAULT_BUDGETS.light;
  }

  /** Builds the VM and runs the body; throws (naming the script) when it does not load or holds too much to keep. */
  static create(options: BotVmOptions): BotVm {
    const vm = new BotVm(options);
    vm.#library = vm.#reachLibrary();
    const loaded = vm.evaluate();
    if (!loaded.ok) throw new Error(`${options.script}: ${loaded.error}`);
    vm.#keep();
    if (!vm.#snapshot) throw new Error(`${options.script}: ${TOO_BIG}`);
    return vm;
  }

  /** The file changed on disk since the body ran. */
  get changed(): boolean {
    return this.stale();
  }

  /** Hot reload: the new body over the kept globals; a broken file keeps the old code. */
  refresh(): { ok: true } | { ok: false; error: string } {
    this.#snapshot?.rewind();
    this.sandbox.cap = Infinity;
    const result = this.reevaluate();
    if (result.ok) this.#keep();
    return result;
  }

  /**
   * `think(bot_id, view)`: a table is the input, nil is no input, anything
   * else (and any failure) is a failed call. What the call wrote to the
   * script's globals and tables is put back either way.
   */
  think(botId: string, view: JsonObject): ThinkResult {
    const L = this.L;
    if (!this.#snapshot) return { ok: false, kind: 'error', message: TOO_BIG };
    this.sandbox.cap = Infinity;
    if (!this.pushCallback(THINK)) return { ok: false, kind: 'error', message: 'the bot script defines no think function' };
    lua.lua_pushstring(L, to_luastring(botId));
    pushJson(L, view);
    const out = this.sandbox.call(2, this.#instructions, THINK_MS);
    let result: ThinkResult;
    if (!out.ok) {
      result = out;
    } else {
      const type = out.results > 0 ? lua.lua_type(L, -out.results) : lua.LUA_TNIL;
      if (type === lua.LUA_TNIL) {
        result = { ok: true, input: null };
      } else if (type !== lua.LUA_TTABLE) {
        result = { ok: false, kind: 'malformed', message: 'think must return a table (the input) or nil' };
      } else {
        try {
          const input = toJson(L, -out.results);
          // An empty table at the top encodes as {}; a list is not an input.
          result = isObjectJson(input) ? { ok: true, input } : { ok: false, kind: 'malformed', message: 'think must return a table of named fields' };
        } catch (err) {
          if (!(err instanceof MarshalError)) throw err;
          result = { ok: false, kind: 'malformed', message: err.message };
        }
      }
    }
    lua.lua_settop(L, 0);
    this.#snapshot.rewind();
    if (!result.ok) this.services.failed?.(result.kind);
    return result;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.#snapshot?.release();
    this.#snapshot = null;
  }

  /** Everything the sandbox made, but the module cache, which the script fills. */
  #reachLibrary(): Reached {
    const L = this.L;
    const library = new Set(VmSnapshot.reach(L));
    lua.lua_getglobal(L, to_luastring(MODULE_CACHE));
    library.delete(lua.lua_topointer(L, -1));
    lua.lua_pop(L, 1);
    return library;
  }

  /** (Re)takes the snapshot of what the body left, outside any script call's budget: its size is bounded by SNAPSHOT_MAX_ENTRIES. */
  #keep(): void {
    this.#snapshot?.release();
    this.#snapshot = VmSnapshot.take(this.L, null, this.#library);
    if (!this.#snapshot) this.services.log.error('bot_script_too_big', { script: this.script, detail: TOO_BIG });
  }
}

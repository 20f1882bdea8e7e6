import { existsSync, readFileSync, realpathSync, statSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { GameInfo, OperatorModes, ScriptSource } from '../runtime/lua/host-interface';
import { reportFengariInternals } from '../runtime/lua/fengari-internals';
import { loadGame, MULTI_MODE_MANIFEST, SINGLE_MODE_SCRIPT } from '../runtime/lua/game-declarations';
import type { Logger } from '../runtime/platform/log';

/** How often file times are compared when fs.watch misses an edit (network mounts, some editors). */
const POLL_MS = 1000;

/**
 * The game as the live hosts read it (matches, worlds, the script lanes): a
 * loaded directory is one, and a node without a directory serves an empty
 * one. `info` may change on rescans.
 */
export interface GameHandle {
  readonly info: GameInfo;
  readonly source: ScriptSource;
  /** Where it is on disk, for script workers to read it themselves; null without one. */
  readonly dir: string | null;
}

export interface LoadedGame extends GameHandle {
  /** The directory, resolved (script workers read it themselves). */
  readonly dir: string;
  /** Modes as of the last good load; `guestAuth`/`registration` stay as read at boot. */
  readonly info: GameInfo;
  /** File access confined to the game directory, with revisions that move when a file changes. */
  readonly source: ScriptSource;
  /** Called after a live rescan changed the mode set; returns an unsubscribe function. */
  onChange(listener: (info: GameInfo) => void): () => void;
  /** Called with the files (paths relative to the directory) whose revision just moved: the watcher hot reload uses, for other readers of the directory. */
  onFilesChanged(listener: (changed: string[]) => void): void;
  close(): void;
}

/**
 * Loads the game directory at boot (a missing directory, a broken script or
 * `rpc.lua`, or a directory with no modes unless `allowEmpty` is a boot
 * error naming the path) and watches it: a changed script bumps
 * its revision, which live VMs pick up at their next tick (hot reload), and
 * a changed manifest or mode script rescans the mode set for new matches.
 */
export function loadGameDirectory(dir: string, operatorModes: OperatorModes, log: Logger, options: { allowEmpty?: boolean } = {}): LoadedGame {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`game directory not found: ${dir}`);
  const root = realpathSync(dir);
  const files = watchGameFiles(root);
  const source = files.source;

  // The node's first VMs are built here, at boot; the script workers run the same fengari.
  reportFengariInternals(log);
  let info: GameInfo;
  try {
    info = loadGame(source, operatorModes);
  } catch (err) {
    files.close();
    throw err;
  }
  // An empty directory is far more often a wrong path than a choice.
  if (info.modes.size === 0 && !options.allowEmpty) {
    files.close();
    throw new Error(`game directory ${root} declares no modes (neither ${MULTI_MODE_MANIFEST} nor ${SINGLE_MODE_SCRIPT}); set allow_empty_game to true if that is intended`);
  }
  for (const n of info.notices) log.warn('game_notice', { file: n.file, message: n.message });
  log.info('game_loaded', { dir: root, modes: [...info.modes.keys()], guest_auth: info.guestAuth, registration: info.registration });
  const bootPosture = { guestAuth: info.guestAuth, registration: info.registration };

  const listeners = new Set<(info: GameInfo) => void>();
  const shapeFiles = () => new Set([MULTI_MODE_MANIFEST, SINGLE_MODE_SCRIPT, ...[...info.modes.values()].map((m) => m.file)]);

  files.onChange((changed) => {
    const shape = shapeFiles();
    if (!changed.some((rel) => shape.has(rel))) return;
    try {
      const next = loadGame(source, operatorModes);
      info = { ...next, ...bootPosture };
      log.info('game_modes_reloaded', { modes: [...info.modes.keys()] });
      for (const listener of listeners) listener(info);
    } catch (err) {
      // The last good mode set stays; the stamp is recorded, so the same broken file is not retried.
      log.warn('game_modes_reload_failed', { error: (err as Error).message });
    }
  });

  return {
    dir: root,
    get info() {
      return info;
    },
    source,
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    onFilesChanged: (listener) => files.onChange(listener),
    close() {
      files.close();
      listeners.clear();
    },
  };
}

export interface WatchedFiles {
  /** Reads confined to the directory; `revision` moves when a file that was read changes. */
  readonly source: ScriptSource;
  /** Called with the files whose revision just moved. */
  onChange(listener: (changed: string[]) => void): void;
  close(): void;
}

/**
 * File access to a game directory with revisions: every file read is
 * remembered, and a change seen by the watcher (or the poll it misses
 * behind) bumps its revision, which live VMs compare before each tick.
 * Script workers build their own over the same directory.
 */
export function watchGameFiles(root: string): WatchedFiles {
  const files = new Map<string, { stamp: string; revision: number }>();

  const stampOf = (rel: string): string => {
    try {
      const st = statSync(path.join(root, rel));
      return `${st.mtimeMs}:${st.size}`;
    } catch {
      return 'missing';
    }
  };

  const source: ScriptSource = {
    read(rel) {
      const full = path.resolve(root, rel);
      let real: string;
      try {
        real = realpathSync(full);
      } catch {
        if (!files.has(rel)) files.set(rel, { stamp: 'missing', revision: 0 });
        return null;
      }
      // A symlink may point anywhere; only what resolves inside the directory is readable.
      if (real !== root && !real.startsWith(root + path.sep)) return null;
      if (!files.has(rel)) files.set(rel, { stamp: stampOf(rel), revision: 0 });
      try {
        return readFileSync(real, 'utf8');
      } catch {
        return null;
      }
    },
    revision(rel) {
      return files.get(rel)?.revision ?? 0;
    },
  };

  const listeners: ((changed: string[]) => void)[] = [];
  const check = () => {
    const changed: string[] = [];
    for (const [rel, entry] of files) {
      const stamp = stampOf(rel);
      if (stamp === entry.stamp) continue;
      entry.stamp = stamp;
      entry.revision++;
      changed.push(rel);
    }
    if (changed.length > 0) for (const listener of listeners) listener(changed);
  };

  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(root, { recursive: true, persistent: false }, () => check());
    watcher.on('error', () => {});
  } catch {
    // Recursive watching is not available everywhere; the poll below still sees every change.
  }
  const poll = setInterval(check, POLL_MS);
  poll.unref();
  return {
    source,
    onChange: (listener) => void listeners.push(listener),
    close() {
      clearInterval(poll);
      watcher?.close();
      listeners.length = 0;
    },
  };
}

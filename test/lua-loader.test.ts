import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadGameDirectory } from '../host/game-directory';
import { GameLoadError } from '../runtime/lua/host-interface';
import { loadGame } from '../runtime/lua/game-declarations';
import { jsonLogger } from '../runtime/platform/log';
import { memorySource, PASSIVE, recordingServices } from './fixtures/games/harness';
import { MatchVm } from '../runtime/lua/match';

const MODE = PASSIVE + 'match_size = 2\n';

describe('loadGame', () => {
  it('single-mode: match.lua is mode "default" and declares the deployment globals', () => {
    const info = loadGame(memorySource({ 'match.lua': MODE + 'guest_auth = true\nscript_registration = "closed"\nmax_players = 4\n' }));
    expect([...info.modes.keys()]).toEqual(['default']);
    expect(info.modes.get('default')).toMatchObject({ file: 'match.lua', match_size: 2, max_players: 4, min_players: 2, strategy: 'fill', listed: false, quick_play: false, kind: 'match' });
    expect(info.guestAuth).toBe(true);
    expect(info.registration).toBe('closed');
  });

  it('single-mode reads guest_auth even when match.lua requires a module at top level', () => {
    const info = loadGame(memorySource({ 'match.lua': 'local m = require("lib")\n' + MODE + 'guest_auth = true', 'lib.lua': 'return {}' }));
    expect(info.guestAuth).toBe(true);
  });

  it('multi-mode: config.lua maps modes to scripts; globals per mode; posture from config.lua only', () => {
    const info = loadGame(
      memorySource({
        'config.lua': 'guest_auth = true\nregistration = "oauth_only"\nreturn { duel = "duel/main.lua", ffa = "ffa.lua" }',
        'duel/main.lua': MODE + 'strategy = "skill_based"\nguest_auth = false',
        'ffa.lua': PASSIVE + 'match_size = 1.9\nmax_players = 8\nmin_players = 3\nlisted = true\nquick_play = true\nstate_strategy = "shared"',
        'match.lua': 'this file is ignored in multi-mode',
      }),
    );
    expect([...info.modes.keys()]).toEqual(['duel', 'ffa']);
    expect(info.modes.get('duel')).toMatchObject({ file: 'duel/main.lua', strategy: 'skill_based', listed: false });
    expect(info.modes.get('ffa')).toMatchObject({ match_size: 1, max_players: 8, min_players: 3, listed: true, quick_play: true, state_strategy: 'shared' });
    expect(info.guestAuth).toBe(true);
    expect(info.registration).toBe('oauth_only');
  });

  it('script_registration wins over registration; unknown values are ignored with a notice', () => {
    expect(loadGame(memorySource({ 'match.lua': MODE + 'registration = "closed"\nscript_registration = "open"' })).registration).toBe('open');
    const info = loadGame(memorySource({ 'match.lua': MODE + 'script_registration = "sometimes"' }));
    expect(info.registration).toBeNull();
    expect(info.notices.length).toBe(1);
  });

  it('non-boolean listed is ignored with a notice; guest_auth counts only a literal true', () => {
    const info = loadGame(memorySource({ 'match.lua': MODE + 'listed = 1\nguest_auth = "yes"' }));
    expect(info.modes.get('default')!.listed).toBe(false);
    expect(info.guestAuth).toBe(false);
    expect(info.notices.map((n) => n.message).join(' ')).toContain("'listed' is not a boolean");
  });

  it('an operator game_modes entry replaces the script\'s mode configuration as a whole and reaches init(config)', () => {
    const source = memorySource({ 'config.lua': 'return { arena = "arena.lua" }', 'arena.lua': MODE + 'listed = false\nmax_players = 2\nmin_players = 2\nstrategy = "skill_based"' });
    const info = loadGame(source, { arena: { listed: true, match_size: 3, difficulty: 'hard' }, ghost: { listed: true } });
    const arena = info.modes.get('arena')!;
    // Keys the entry leaves out take their defaults, not the script's values.
    expect(arena).toMatchObject({ listed: true, match_size: 3, max_players: 3, min_players: 3, strategy: 'fill' });
    expect(info.notices.some((n) => n.message.includes("'ghost'"))).toBe(true);
    const { services } = recordingServices();
    const vm = MatchVm.create({
      source: memorySource({ 'arena.lua': MODE + 'function init(config) return { c = config } end\nfunction get_state(id, s) return s.c end' }),
      mode: arena,
      matchId: 'm-9',
      services,
    });
    vm.init();
    vm.join('a');
    vm.tick();
    expect(JSON.parse(vm.viewJson('a'))).toEqual({ listed: true, match_size: 3, difficulty: 'hard', match_id: 'm-9', mode: 'arena' });
    // Without the entry the script's globals stand.
    expect(loadGame(source).modes.get('arena')).toMatchObject({ listed: false, max_players: 2, strategy: 'skill_based' });
  });

  it('an operator entry without match_size cannot describe a mode: loading stops naming it', () => {
    const source = memorySource({ 'config.lua': 'return { arena = "arena.lua" }', 'arena.lua': MODE });
    expect(() => loadGame(source, { arena: { listed: true } })).toThrow(/mode 'arena': match_size is missing/);
  });

  it('no config.lua and no match.lua: zero modes, guest_auth off', () => {
    const info = loadGame(memorySource({ 'readme.txt': 'nothing' }));
    expect(info.modes.size).toBe(0);
    expect(info.guestAuth).toBe(false);
  });

  it.each([
    [{ 'config.lua': 'return { a = "../x.lua" }' }, 'config.lua', /'\.\.' segment/],
    [{ 'config.lua': 'return { a = "/etc/x.lua" }' }, 'config.lua', /absolute/],
    [{ 'config.lua': 'return { a = "x//y.lua" }' }, 'config.lua', /empty path segment/],
    [{ 'config.lua': 'return { a = 5 }' }, 'config.lua', /must be a string/],
    [{ 'config.lua': 'return { "a.lua" }' }, 'config.lua', /mode name/],
    [{ 'config.lua': 'return { "a.lua", b = "b.lua" }', 'b.lua': MODE }, 'config.lua', /mode names must be strings/],
    [{ 'config.lua': 'x = 1' }, 'config.lua', /must return a table/],
    [{ 'config.lua': 'return {' }, 'config.lua', /expected/],
    [{ 'config.lua': 'local m = require("x") return {}', 'x.lua': 'return 1' }, 'config.lua', /require is not available/],
    [{ 'config.lua': 'return { a = "a.lua" }' }, 'a.lua', /file not found/],
    [{ 'config.lua': 'return { a = "a.lua" }', 'a.lua': 'function init( end' }, 'a.lua', /script_load_failed/],
    [{ 'config.lua': 'return { a = "a.lua" }', 'a.lua': PASSIVE }, 'a.lua', /match_size/],
    [{ 'match.lua': PASSIVE + 'match_size = 0' }, 'match.lua', /positive/],
    [{ 'match.lua': 'game.log("info", "top level")\nmatch_size = 2' }, 'match.lua', /script_load_failed/],
    [{ 'match.lua': 'while true do end' }, 'match.lua', /budget/],
  ])('a broken game directory throws naming the file (%#)', (files, file, message) => {
    let error: unknown;
    try {
      loadGame(memorySource(files as Record<string, string>));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(GameLoadError);
    expect((error as GameLoadError).file).toBe(file);
    expect((error as Error).message).toMatch(message);
  });
});

describe('loadGameDirectory (host)', () => {
  const dirs: string[] = [];
  const log = jsonLogger(() => {}, 'error');
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const fresh = (files: Record<string, string>) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-game-'));
    dirs.push(dir);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), text);
    }
    return dir;
  };

  it('a missing directory is a boot error naming the path', () => {
    expect(() => loadGameDirectory('/nonexistent/svc-game', {}, log)).toThrow('/nonexistent/svc-game');
  });

  it('loads the bundled demo game', () => {
    const game = loadGameDirectory('examples/demo-game', {}, log);
    try {
      expect([...game.info.modes.keys()]).toEqual(['arena', 'arena_bots', 'lobby', 'skirmish', 'village']);
      expect(game.info.guestAuth).toBe(true);
      expect(game.info.modes.get('lobby')!.listed).toBe(true);
      expect(game.info.modes.get('arena')!.match_size).toBe(2);
    } finally {
      game.close();
    }
  });

  it('refuses files that resolve outside the directory (symlinks included)', () => {
    const outside = fresh({ 'secret.lua': 'return { leaked = true }' });
    const dir = fresh({ 'match.lua': MODE });
    symlinkSync(path.join(outside, 'secret.lua'), path.join(dir, 'secret.lua'));
    const game = loadGameDirectory(dir, {}, log);
    try {
      expect(game.source.read('secret.lua')).toBeNull();
      expect(game.source.read('../' + path.basename(outside) + '/secret.lua')).toBeNull();
      expect(game.source.read('match.lua')).toBe(MODE);
    } finally {
      game.close();
    }
  });

  it('a live VM picks up an edited file at its next tick; a broken edit keeps the old code', async () => {
    const v1 = PASSIVE + 'match_size = 1\nV = 1\nfunction get_state(id, s) return { v = V } end';
    const dir = fresh({ 'match.lua': v1 });
    const game = loadGameDirectory(dir, {}, log);
    try {
      const { services } = recordingServices();
      const vm = MatchVm.create({ source: game.source, mode: game.info.modes.get('default')!, matchId: 'm', services });
      vm.init();
      vm.join('a');
      vm.tick();
      expect(vm.viewJson('a')).toBe('{"v":1}');

      const edit = async (text: string) => {
        const file = path.join(dir, 'match.lua');
        const before = game.source.revision!('match.lua');
        writeFileSync(file, text);
        const t = new Date(Date.now() + 5000 * (before + 1));
        utimesSync(file, t, t);
        await expect.poll(() => game.source.revision!('match.lua'), { timeout: 5000, interval: 50 }).toBeGreaterThan(before);
      };
      await edit(v1.replace('V = 1', 'V = 2'));
      vm.tick();
      expect(vm.viewJson('a')).toBe('{"v":2}');
      await edit('function tick(state) return state');
      vm.tick();
      expect(vm.viewJson('a')).toBe('{"v":2}');
    } finally {
      game.close();
    }
  });
});

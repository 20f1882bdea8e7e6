import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseCli } from '../host/config';
import { parseSettings, SettingsError } from '../runtime/contracts/settings';

const run = promisify(execFile);
const root = path.resolve(__dirname, '..');
const dir = mkdtempSync(path.join(tmpdir(), 'svc-config-'));

function file(name: string, content: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

function thrownBy(fn: () => unknown): SettingsError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SettingsError);
    return err as SettingsError;
  }
  throw new Error('expected a SettingsError');
}

describe('operator settings', () => {
  it('fills every default from an empty file', () => {
    const { settings, notices } = parseSettings({});
    expect(settings.pbkdf2_iterations).toBeGreaterThanOrEqual(100_000);
    expect(settings.registration).toBeNull();
    expect(settings.rate_limits.api).toEqual({ limit: 300, window: 1000 });
    expect(settings.rate_limits.join).toEqual({ limit: 10, window: 60_000 });
    expect(settings.client_gate_timeout).toBe(5000);
    expect(notices).toEqual([]);
  });

  it('names an unknown key', () => {
    const err = thrownBy(() => parseSettings({ rate_limit: {} }));
    expect(err.key).toBe('rate_limit');
    expect(err.message).toContain("'rate_limit'");
  });

  it('names the nested key of a bad value', () => {
    expect(thrownBy(() => parseSettings({ rate_limits: { api: { limit: 'many', window: 1000 } } })).key).toBe('rate_limits.api.limit');
    expect(thrownBy(() => parseSettings({ rate_limits: { bogus: { limit: 1, window: 1 } } })).key).toMatch(/^rate_limits/);
    expect(thrownBy(() => parseSettings({ pbkdf2_iterations: 10 })).key).toBe('pbkdf2_iterations');
    expect(thrownBy(() => parseSettings({ client_gate_on_error: 'maybe' })).key).toBe('client_gate_on_error');
    expect(thrownBy(() => parseSettings({ trusted_proxies: 'everyone' })).key).toBe('trusted_proxies');
  });

  it('refuses a mistyped enum instead of booting with another meaning', () => {
    expect(thrownBy(() => parseSettings({ registration: 'Closed' })).key).toBe('registration');
    expect(thrownBy(() => parseSettings({ registration: 'invite_only' })).key).toBe('registration');
    expect(thrownBy(() => parseSettings({ ws_allowed_origins: 'https://a.example' })).key).toBe('ws_allowed_origins');
    expect(parseSettings({ registration: 'closed' }).settings.registration).toBe('closed');
  });

  it('lists every bad key at once', () => {
    const err = thrownBy(() => parseSettings({ registration: 'Closed', ws_allowed_origins: 'x', pbkdf2_iterations: 10, rate_limit: {}, bogus: 1 }));
    expect(err.problems.map((p) => p.key).sort()).toEqual(['bogus', 'pbkdf2_iterations', 'rate_limit', 'registration', 'ws_allowed_origins']);
    expect(err.message).toMatch(/^5 invalid settings: /);
    for (const key of ['registration', 'ws_allowed_origins', 'pbkdf2_iterations', 'rate_limit', 'bogus']) expect(err.message).toContain(`'${key}'`);
    expect(err.message).not.toContain('\n');
  });
});

describe('host configuration', () => {
  it('reads the file named by --config, or by SVC_CONFIG', () => {
    const a = file('a.json', JSON.stringify({ registration: 'closed' }));
    const b = file('b.json', JSON.stringify({ registration: 'oauth_only' }));
    expect(loadConfig(['--config', a], {}).settings.registration).toBe('closed');
    expect(loadConfig([], { SVC_CONFIG: b }).settings.registration).toBe('oauth_only');
    expect(loadConfig(['--config', a], { SVC_CONFIG: b }).settings.registration).toBe('closed');
  });

  it('keeps dev_errors off unless set, and off in production (NODE_ENV=production) whatever the file says, with a notice', () => {
    expect(loadConfig([], {}).settings.dev_errors).toBe(false);
    const on = file('dev.json', JSON.stringify({ dev_errors: true }));
    expect(loadConfig(['--config', on], {}).settings.dev_errors).toBe(true);
    expect(loadConfig(['--config', on], { NODE_ENV: 'development' }).settings.dev_errors).toBe(true);
    const production = loadConfig(['--config', on], { NODE_ENV: 'production' });
    expect(production.settings.dev_errors).toBe(false);
    expect(production.notices).toContainEqual({ key: 'dev_errors', message: expect.stringContaining('production') });
    expect(loadConfig([], { NODE_ENV: 'production' }).notices).toEqual([]);
    expect(() => parseSettings({ dev_errors: 'yes' })).toThrow(/dev_errors/);
  });

  it('takes deployment basics from the environment with their defaults', () => {
    const c = loadConfig([], {}, '/srv/app');
    expect(c).toMatchObject({ port: 8084, host: '0.0.0.0', databaseUrl: null, dataDir: '/srv/app/data', gameDir: '/srv/app/examples/demo-game' });
    const d = loadConfig([], { PORT: '9000', DATABASE_URL: 'postgres://x@y/z', SVC_DATA_DIR: '/var/svc', GAME_DIR: '/games/one' }, '/srv/app');
    expect(d).toMatchObject({ port: 9000, databaseUrl: 'postgres://x@y/z', dataDir: '/var/svc', gameDir: '/games/one' });
  });

  it('parses flags with node\'s parser: --config file, --config=file, --help, --migrate-only; refuses unknown ones', () => {
    const a = file('eq.json', JSON.stringify({ registration: 'closed' }));
    expect(loadConfig([`--config=${a}`], {}).settings.registration).toBe('closed');
    expect(parseCli(['--help'])).toMatchObject({ help: true });
    expect(parseCli(['--migrate-only', '--config', a])).toEqual({ help: false, migrateOnly: true, config: a });
    expect(thrownBy(() => loadConfig(['--verbose'], {})).key).toBe('--verbose');
    expect(thrownBy(() => loadConfig(['stray'], {})).message).toContain('stray');
    expect(thrownBy(() => loadConfig(['--config='], {})).key).toBe('--config');
  });

  it('refuses a bad PORT, a missing file and a file that is not JSON', () => {
    expect(thrownBy(() => loadConfig([], { PORT: 'eighty' })).key).toBe('PORT');
    expect(thrownBy(() => loadConfig(['--config', path.join(dir, 'absent.json')], {})).key).toBe('--config');
    expect(thrownBy(() => loadConfig(['--config', file('bad.json', '{nope')], {})).key).toBe('--config');
    expect(thrownBy(() => loadConfig(['--config'], {})).key).toBe('--config');
  });
});

describe('boot', () => {
  it('stops with a message naming the key when a setting is invalid', async () => {
    const bad = file('boot.json', JSON.stringify({ rate_limits: { api: { limit: 0, window: 1000 } } }));
    const err = await run(process.execPath, [path.join(root, 'dist/host.mjs'), '--config', bad], {
      cwd: dir,
      env: { ...process.env, PORT: '0', SVC_DATA_DIR: path.join(dir, 'data') },
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err).not.toBeNull();
    expect(err!.code).toBe(2);
    expect(err!.stderr).toContain("'rate_limits.api.limit'");
  });
});

describe('script log buckets', () => {
  it('default to 30 game.log lines a second per match and 300 per node', () => {
    const { settings } = parseSettings({});
    expect(settings.rate_limits.log).toEqual({ limit: 30, window: 1000 });
    expect(settings.rate_limits.log_global).toEqual({ limit: 300, window: 1000 });
  });
});

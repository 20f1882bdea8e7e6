import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { parseSettings, SettingsError, settingsProblems, type Settings, type SettingsNotice } from '../runtime/contracts/settings';

/** Deployment basics from the environment; operator settings from one JSON file. */
export interface HostConfig {
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  gameDir: string;
  configFile: string | null;
  /** The fleet's Redis (`REDIS_URL`, `REDIS_PREFIX`, `SVC_NODE_ID`); null: this node stands alone. */
  redis: { url: string; prefix: string; nodeId?: string } | null;
  settings: Settings;
  notices: SettingsNotice[];
}

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8084),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z.string().min(1).optional(),
  SVC_DATA_DIR: z.string().min(1).default('./data'),
  GAME_DIR: z.string().min(1).optional(),
  SVC_CONFIG: z.string().min(1).optional(),
  REDIS_URL: z
    .string()
    .min(1)
    .refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// or rediss:// URL')
    .optional(),
  // Pub/sub channels ignore the database number in the URL: fleets sharing one Redis need their own prefix.
  REDIS_PREFIX: z.string().min(1).max(64).default('svc:'),
  SVC_NODE_ID: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits, _ . -').optional(),
  // Production mode: the production image sets it. Any other value (or none) is development.
  NODE_ENV: z.string().optional(),
});

export const DEFAULT_GAME_DIR = 'examples/demo-game';

/** What the command line asked for. */
export interface CliArgs {
  config: string | null;
  help: boolean;
  migrateOnly: boolean;
}

export const USAGE = `usage: node dist/host.mjs [--config <file>] [--migrate-only] [--help]
       (npm start, npm run migrate)

  --config <file>   operator settings, one JSON object (also --config=<file>)
  --migrate-only    apply database migrations and exit
  --help            print this and exit

environment:
  PORT              HTTP and WebSocket port (default 8084)
  HOST              listen address (default 0.0.0.0)
  DATABASE_URL      PostgreSQL connection string; unset runs the embedded database
  SVC_DATA_DIR      folder of the embedded database (default ./data)
  GAME_DIR          the game directory (default examples/demo-game)
  SVC_CONFIG        settings file when --config is not given
  REDIS_URL         Redis of the fleet (redis://...); unset, the node stands alone
  REDIS_PREFIX      prefix of the fleet's Redis keys and channel (default svc:)
  SVC_NODE_ID       this node's name in the fleet (default host-pid-random)
  NODE_ENV          production: dev_errors stays off whatever the settings say
`;

/** Flags by node's own parser: `--config file` and `--config=file`; anything unknown is refused. */
export function parseCli(argv: string[]): CliArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, help: { type: 'boolean' }, 'migrate-only': { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    const key = /'(--?[^' ]+)/.exec(message)?.[1] ?? 'arguments';
    throw new SettingsError(key, `${message} (see --help)`);
  }
  if (values.config === '') throw new SettingsError('--config', 'needs a file path');
  return { config: values.config ?? null, help: values.help ?? false, migrateOnly: values['migrate-only'] ?? false };
}

export function loadConfig(argv: string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): HostConfig {
  const parsedEnv = envSchema.safeParse(env);
  if (!parsedEnv.success) throw new SettingsError(settingsProblems(parsedEnv.error.issues));
  const e = parsedEnv.data;
  const cli = parseCli(argv);
  const configFile = cli.config ?? e.SVC_CONFIG ?? null;

  let raw: unknown = {};
  if (configFile) {
    let text: string;
    try {
      text = readFileSync(path.resolve(cwd, configFile), 'utf8');
    } catch (err) {
      throw new SettingsError('--config', `cannot read ${configFile}: ${(err as Error).message}`);
    }
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new SettingsError('--config', `${configFile} is not valid JSON: ${(err as Error).message}`);
    }
  }
  const parsed = parseSettings(raw);
  const notices = parsed.notices;
  let settings = parsed.settings;
  // Script errors carry script paths and messages: production keeps them server-side whatever the file says.
  if (e.NODE_ENV === 'production' && settings.dev_errors) {
    settings = { ...settings, dev_errors: false };
    notices.push({ key: 'dev_errors', message: 'ignored: NODE_ENV is production, where script errors stay in the log' });
  }
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL ?? null,
    dataDir: path.resolve(cwd, e.SVC_DATA_DIR),
    gameDir: path.resolve(cwd, e.GAME_DIR ?? settings.game_dir ?? DEFAULT_GAME_DIR),
    configFile,
    redis: e.REDIS_URL ? { url: e.REDIS_URL, prefix: e.REDIS_PREFIX, ...(e.SVC_NODE_ID ? { nodeId: e.SVC_NODE_ID } : {}) } : null,
    settings,
    notices,
  };
}

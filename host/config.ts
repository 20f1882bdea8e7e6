import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { parseSettings, SettingsError, type Settings, type SettingsNotice } from '../runtime/settings';

/** Deployment basics from the environment; operator settings from one JSON file. */
export interface HostConfig {
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  gameDir: string;
  configFile: string | null;
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
});

export const DEFAULT_GAME_DIR = 'examples/demo-game';

export function loadConfig(argv: string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): HostConfig {
  const parsedEnv = envSchema.safeParse(env);
  if (!parsedEnv.success) {
    const issue = parsedEnv.error.issues[0]!;
    throw new SettingsError(issue.path.join('.'), issue.message);
  }
  const e = parsedEnv.data;
  const flag = argv.indexOf('--config');
  if (flag >= 0 && !argv[flag + 1]) throw new SettingsError('--config', 'needs a file path');
  const configFile = flag >= 0 ? argv[flag + 1]! : (e.SVC_CONFIG ?? null);

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
  const { settings, notices } = parseSettings(raw);
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL ?? null,
    dataDir: path.resolve(cwd, e.SVC_DATA_DIR),
    gameDir: path.resolve(cwd, e.GAME_DIR ?? settings.game_dir ?? DEFAULT_GAME_DIR),
    configFile,
    settings,
    notices,
  };
}

import { z } from 'zod';

/**
 * Operator settings, by the spec's names. One JSON object, validated once at
 * boot; an invalid value stops the boot with a message naming the key. Each
 * domain adds its keys here when it lands, with its default, and the README
 * table lists them all.
 */

export const RATE_LIMIT_GROUPS = [
  'register',
  'auth',
  'iap',
  'api',
  'ws_connect',
  'join',
  'guest_global',
  'rehome',
  'rehome_global',
  'script_log',
  'log',
  'log_global',
  'erase',
] as const;
export type RateLimitGroup = (typeof RATE_LIMIT_GROUPS)[number];

export interface RateRule {
  limit: number;
  /** Window length in milliseconds. */
  window: number;
}

/** Spec part 8 defaults. `erase` is the self-erase bucket the spec keeps separate. */
export const DEFAULT_RATE_LIMITS: Record<RateLimitGroup, RateRule> = {
  register: { limit: 3, window: 1000 },
  auth: { limit: 5, window: 1000 },
  iap: { limit: 10, window: 1000 },
  api: { limit: 300, window: 1000 },
  ws_connect: { limit: 60, window: 1000 },
  join: { limit: 10, window: 60_000 },
  guest_global: { limit: 100, window: 1000 },
  rehome: { limit: 5, window: 1000 },
  rehome_global: { limit: 200, window: 1000 },
  script_log: { limit: 3, window: 10_000 },
  log: { limit: 20, window: 1000 },
  log_global: { limit: 200, window: 1000 },
  erase: { limit: 3, window: 60_000 },
};

export type RegistrationMode = 'open' | 'oauth_only' | 'closed';

const positiveInt = z.number().int().positive();
const rateRule = z.object({ limit: positiveInt, window: positiveInt }).strict();
const gameModeEntry = z
  .object({
    listed: z.boolean().optional(),
    quick_play: z.boolean().optional(),
    match_size: positiveInt.optional(),
    max_players: positiveInt.optional(),
    min_players: positiveInt.optional(),
    strategy: z.string().min(1).optional(),
  })
  .catchall(z.json());

const rawSchema = z
  .object({
    /** Registration posture; unset lets the game script narrow it. */
    registration: z.string().optional(),
    pbkdf2_iterations: z.number().int().min(1000).max(10_000_000).default(100_000),
    access_token_ttl: positiveInt.default(3600),
    refresh_token_ttl: positiveInt.default(30 * 24 * 3600),
    auth_cache_ttl_ms: z.number().int().min(0).default(60_000),
    rate_limits: z.partialRecord(z.enum(RATE_LIMIT_GROUPS), rateRule).default({}),
    /** Peers whose X-Forwarded-For is believed. Exact addresses or IPv4 CIDRs. */
    trusted_proxies: z.array(z.string().min(1)).default([]),
    /** Browser origins allowed by CORS on the REST API. Empty: no CORS headers. */
    cors_origins: z.array(z.string().min(1)).default([]),
    db_pool_size: positiveInt.max(1000).default(10),
    /** How long shutdown waits for in-flight requests before closing anyway. */
    shutdown_grace_ms: z.number().int().min(0).default(10_000),
    log_level: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
    client_gate: z.string().min(1).optional(),
    client_gate_timeout: positiveInt.default(5000),
    client_gate_on_error: z.enum(['fail', 'skip']).default('fail'),
    /**
     * Browser origins allowed to open `/ws`; unset or empty admits all. Checked
     * by the gateway, not here: a malformed value fails closed (wire-protocol 4.3).
     */
    ws_allowed_origins: z.unknown().optional(),
    ws_idle_auth_timeout_ms: positiveInt.default(10_000),
    /** An authenticated socket with no inbound frame for this long is closed. */
    ws_idle_timeout_ms: positiveInt.default(60_000),
    /** Live matches this node runs at once. */
    match_max: positiveInt.default(1000),
    matchmaker_tick_ms: positiveInt.default(1000),
    /** A ticket waiting longer is dropped with `match.matchmaker_expired`. */
    matchmaker_max_wait_ms: positiveInt.default(60_000),
    matchmaker_max_queue: positiveInt.default(10_000),
    /** `skill_based`: the skill window widens by 50 per this much waiting (lua-scripting 10). */
    matchmaker_skill_widen_ms: positiveInt.default(5000),
    /** The game directory when env GAME_DIR is unset (decision 16). */
    game_dir: z.string().min(1).optional(),
    /**
     * Per-mode overrides of the game script's globals (lua-scripting 2.7),
     * key by key; the whole entry also reaches the script's `init(config)`.
     */
    game_modes: z.record(z.string().min(1).max(64), gameModeEntry).default({}),
    /** A chat channel with no live member stops (drops its in-memory buffer) after this long. */
    chat_idle_stop_ms: positiveInt.default(60_000),
    /** `chat.send` and `dm.send` frames one connection may send per window (inside the 60 frames/s cap). */
    chat_send_rate: rateRule.default({ limit: 10, window: 1000 }),
    /** VM instructions one Lua callback may run (decision 4). */
    lua_instruction_budget: z
      .object({ init_tick: positiveInt.default(1_000_000), other: positiveInt.default(200_000) })
      .strict()
      .default({ init_tick: 1_000_000, other: 200_000 }),
  })
  .strict();

export type RawSettings = z.input<typeof rawSchema>;

export interface Settings extends Omit<z.output<typeof rawSchema>, 'registration' | 'rate_limits'> {
  /** The operator's posture, or null when unset (the game script may then narrow it). */
  registration: RegistrationMode | null;
  /** Every group with the operator's overrides applied. */
  rate_limits: Record<RateLimitGroup, RateRule>;
}

export class SettingsError extends Error {
  constructor(readonly key: string, detail: string) {
    super(`invalid setting '${key}': ${detail}`);
    this.name = 'SettingsError';
  }
}

export interface SettingsNotice {
  key: string;
  message: string;
}

/**
 * Validates operator settings. Returns the settings and the leniencies the spec
 * asks for (an unknown registration mode means `open`), reported as notices
 * the host logs at boot.
 */
export function parseSettings(input: unknown): { settings: Settings; notices: SettingsNotice[] } {
  const result = rawSchema.safeParse(input ?? {});
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const unknownKey = issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined;
    const key = [...issue.path.map(String), ...(unknownKey ? [unknownKey] : [])].join('.') || '(root)';
    throw new SettingsError(key, unknownKey ? 'unknown setting' : issue.message);
  }
  const raw = result.data;
  const notices: SettingsNotice[] = [];

  let registration: RegistrationMode | null = null;
  if (raw.registration !== undefined) {
    if (raw.registration === 'open' || raw.registration === 'oauth_only' || raw.registration === 'closed') {
      registration = raw.registration;
    } else {
      registration = 'open';
      notices.push({ key: 'registration', message: `unrecognised mode '${raw.registration}' treated as 'open'` });
    }
  }

  return {
    settings: {
      ...raw,
      registration,
      rate_limits: { ...DEFAULT_RATE_LIMITS, ...raw.rate_limits },
    },
    notices,
  };
}

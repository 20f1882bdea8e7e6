import { z } from 'zod';
import { parseAddressRange } from '../platform/address-ranges';

/**
 * Operator settings, under the key names the settings table of docs/operations.md lists. One JSON object, validated once at
 * boot; an invalid value stops the boot with a message naming the key. Each
 * domain adds its keys here when it lands, with its default, and the docs/operations.md
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
  'resync',
  'resync_global',
  'script_log',
  'log',
  'log_global',
  'script_chat',
  'erase',
  'login_failures',
  'datagram_global',
  'datagram_conn',
  'datagram_input',
] as const;
export type RateLimitGroup = (typeof RATE_LIMIT_GROUPS)[number];

export interface RateRule {
  limit: number;
  /** Window length in milliseconds. */
  window: number;
}

/** Default rate limits. `erase` is a bucket of its own for self-erase. */
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
  resync: { limit: 2, window: 10_000 },
  resync_global: { limit: 20, window: 1000 },
  script_log: { limit: 3, window: 10_000 },
  // game.log lines: per match (or zone), and per node.
  log: { limit: 30, window: 1000 },
  log_global: { limit: 300, window: 1000 },
  // game.chat.send messages per channel (every script of the node together).
  script_chat: { limit: 20, window: 1000 },
  erase: { limit: 3, window: 60_000 },
  // Failed password logins per account, whatever address they come from
  // (docs/decisions/0016): a botnet gets 10 guesses per 5 minutes on one
  // account, and the real owner waits at most 5 minutes.
  login_failures: { limit: 10, window: 300_000 },
  // The datagram plane's tiers (docs/datagrams.md), keyed by a constant or a conn_id, never an address:
  // every datagram the node looks at; datagrams of one live connection before its mac is checked
  // (room for pings and a rebind's hellos beside input at the socket's own rate); authenticated inputs.
  datagram_global: { limit: 50_000, window: 1000 },
  datagram_conn: { limit: 120, window: 1000 },
  datagram_input: { limit: 60, window: 1000 },
};

export type RegistrationMode = 'open' | 'oauth_only' | 'closed';

/** The OIDC providers a deployment may configure. */
export const OIDC_PROVIDERS = ['google', 'apple', 'microsoft', 'discord'] as const;
export type OidcProviderName = (typeof OIDC_PROVIDERS)[number];
/** Peppers shorter than this count as absent: too short to key the guest verifier safely. */
export const MIN_PEPPER_BYTES = 32;

const positiveInt = z.number().int().positive();
const rateRule = z.object({ limit: positiveInt, window: positiveInt }).strict();
/** `host` or `host:port`: what a client is told to send its datagrams to. */
const ENDPOINT = /^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::(?:[1-9][0-9]{0,4}))?$/;
const poseField = z
  .object({
    name: z.string().min(1).max(64),
    scale: z.number().positive().max(1_000_000),
  })
  .strict();
const datagramPlane = z
  .object({
    port: z.number().int().min(0).max(65535),
    host: z.string().min(1).max(255).regex(/^[^\s/]+$/, 'must be an address').default('0.0.0.0'),
    endpoint: z
      .string()
      .regex(ENDPOINT, 'must be host or host:port, as clients will send to it')
      .refine((e) => Number(/\]?:(\d+)$/.exec(e)?.[1] ?? 0) <= 65535, 'port must be at most 65535'),
    pose_fields: z
      .array(poseField)
      .max(8, 'at most 8 fields: the record mask is one byte')
      .refine((fields) => new Set(fields.map((f) => f.name)).size === fields.length, 'field names must be distinct')
      .default([]),
    period_ticks: positiveInt.max(3600).default(20),
  })
  .strict();
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

// Entries are checked at boot by runtime/accounts/oidc.ts, which drops (and logs) one
// without an https issuer instead of stopping the node.
const oidcProviderEntry = z
  .object({ issuer: z.string().optional(), client_id: z.string().min(1).optional(), client_secret: z.string().optional() })
  .strict();

const rawSchema = z
  .object({
    /** Registration posture; unset lets the game script narrow it. */
    registration: z.enum(['open', 'oauth_only', 'closed']).optional(),
    pbkdf2_iterations: z.number().int().min(1000).max(10_000_000).default(100_000),
    access_token_ttl: positiveInt.default(3600),
    refresh_token_ttl: positiveInt.default(30 * 24 * 3600),
    auth_cache_ttl_ms: z.number().int().min(0).default(60_000),
    profile_cache_ttl_ms: z.number().int().min(0).default(10_000),
    /** How often expired token rows are deleted. */
    token_sweep_interval_ms: positiveInt.default(3_600_000),
    rate_limits: z.partialRecord(z.enum(RATE_LIMIT_GROUPS), rateRule).default({}),
    /** Peers whose X-Forwarded-For is believed: addresses or CIDR ranges, IPv4 or IPv6. */
    trusted_proxies: z.array(z.string().refine((e) => parseAddressRange(e) !== null, 'not an IP address or CIDR range')).default([]),
    /** Browser origins allowed by CORS on the REST API. Empty: no CORS headers. */
    cors_origins: z.array(z.string().min(1)).default([]),
    db_pool_size: positiveInt.max(1000).default(10),
    /**
     * Bound on opening a database connection and on waiting for a free one
     * (docs/decisions/0008): past it the request answers 503 instead of queueing.
     */
    db_connect_timeout_ms: positiveInt.max(600_000).default(3000),
    /**
     * Server-side statement timeout; a client-side deadline one second later
     * catches a network that went silent. Migrations run without it.
     */
    db_statement_timeout_ms: positiveInt.max(600_000).default(5000),
    /** How long boot waits for an unreachable database before the process exits 1. */
    db_boot_timeout_ms: positiveInt.default(60_000),
    /** How long shutdown waits for in-flight requests before closing anyway. */
    shutdown_grace_ms: z.number().int().min(0).default(10_000),
    log_level: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
    client_gate: z.string().min(1).optional(),
    client_gate_timeout: positiveInt.default(5000),
    client_gate_on_error: z.enum(['fail', 'skip']).default('fail'),
    /** Operator override of the game's `guest_auth` declaration; when set it wins both ways. */
    guest_auth: z.boolean().optional(),
    /** Key id → pepper (or one bare pepper); under 32 bytes counts as absent. */
    guest_verifier_pepper: z.union([z.string(), z.record(z.string().min(1).max(64), z.string())]).optional(),
    guest_verifier_key_id: z.string().min(1).max(64).default('v1'),
    /** Maximum unclaimed guests; `infinity` for no cap. */
    guest_unlinked_cap: z.union([z.number().int().min(0), z.literal('infinity')]).default('infinity'),
    /** Seconds of inactivity after which an unclaimed guest is erased; unset keeps guests forever. */
    guest_reap_after: positiveInt.optional(),
    guest_reap_interval_ms: positiveInt.default(60_000),
    oidc_providers: z.partialRecord(z.enum(OIDC_PROVIDERS), oidcProviderEntry).default({}),
    /** PEM file of the trust anchor(s) for OIDC discovery and key fetches; unset uses the system roots. */
    oidc_ca_file: z.string().min(1).optional(),
    /** Bound on one outbound call to an identity provider (discovery, keys, ticket API). */
    provider_timeout_ms: positiveInt.default(5000),
    steam_api_key: z.string().min(1).optional(),
    steam_app_id: z.union([z.string().regex(/^\d+$/), z.number().int().positive()]).optional(),
    steam_api_base: z.string().url().default('https://api.steampowered.com'),
    /**
     * Store receipts (runtime/receipts/): the first store's trust anchor (a
     * PEM or DER file, or inline PEM / base64 DER certificates) and bundle id;
     * the second store's package, service-account key (a file or the key's
     * JSON inline) and endpoints. Files and keys are read and checked at boot
     * by host/infra/store-credentials.ts.
     */
    apple_root_cert_path: z.string().min(1).optional(),
    apple_root_certs: z.array(z.string().min(1)).optional(),
    apple_bundle_id: z.string().min(1).optional(),
    google_package_name: z.string().min(1).optional(),
    google_service_account_key_path: z.string().min(1).optional(),
    google_service_account_key: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).optional(),
    google_token_url: z.string().url().default('https://oauth2.googleapis.com/token'),
    google_play_api_base: z.string().url().default('https://androidpublisher.googleapis.com'),
    /** Browser origins allowed to open `/ws`; unset or empty admits all. */
    ws_allowed_origins: z.array(z.string().min(1)).optional(),
    ws_idle_auth_timeout_ms: positiveInt.default(10_000),
    /** An authenticated socket with no inbound frame for this long is closed. */
    ws_idle_timeout_ms: positiveInt.default(60_000),
    /**
     * The datagram plane (docs/datagrams.md): unset, it is off and `asobi.datagram.open` answers
     * `datagram_unavailable`. `port` and `host` are where the node binds its UDP socket, `endpoint`
     * what clients are told to send to (its port defaults to the bound one), `pose_fields` the
     * transform fields poses carry with their scales, `period_ticks` the refresh of entities at rest.
     */
    datagrams: datagramPlane.optional(),
    /** Grant the binary `world.tick` wire to sockets that ask for it in `session.connect`; off, every socket gets text. */
    binary_wire: z.boolean().default(true),
    /** `game.send` also pushes the deprecated `game.message` twin, before `module.message`, as the asobi family does by default. */
    ws_legacy_game_frames: z.boolean().default(true),
    /**
     * Development errors: a failing `handle_input` also sends its player `module.error` (and the `game.error`
     * twin). Off by default, and forced off when NODE_ENV is `production` (host/config.ts).
     */
    dev_errors: z.boolean().default(false),
    /** Live matches this node runs at once. */
    match_max: positiveInt.default(1000),
    /** Live worlds on this node, and live worlds one player may have created. */
    world_max: positiveInt.default(1000),
    world_max_per_player: positiveInt.default(5),
    /** How often a persistent world saves its zones (and once more at shutdown). */
    world_snapshot_ms: positiveInt.default(30_000),
    matchmaker_tick_ms: positiveInt.default(1000),
    /** A ticket waiting longer is dropped with `match.matchmaker_expired`. */
    matchmaker_max_wait_ms: positiveInt.default(60_000),
    matchmaker_max_queue: positiveInt.default(10_000),
    /** `skill_based`: the skill window widens by 50 per this much waiting. */
    matchmaker_skill_widen_ms: positiveInt.default(5000),
    /** How often each mode with bots and a person waiting gets bot tickets for the gap (8 s by default). */
    matchmaker_bot_fill_ms: positiveInt.default(8000),
    /** The game directory when env GAME_DIR is unset. */
    game_dir: z.string().min(1).optional(),
    /**
     * Per-mode overrides of the game script's globals,
     * key by key; the whole entry also reaches the script's `init(config)`.
     */
    game_modes: z.record(z.string().min(1).max(64), gameModeEntry).default({}),
    /** A chat channel with no live member stops (drops its in-memory buffer) after this long. */
    chat_idle_stop_ms: positiveInt.default(60_000),
    /** `chat.send` and `dm.send` frames one connection may send per window (inside the 60 frames/s cap). */
    chat_send_rate: rateRule.default({ limit: 10, window: 1000 }),
    /** VM instructions one Lua callback may run (docs/decisions/0021). */
    lua_instruction_budget: z
      .object({ init_tick: positiveInt.default(1_000_000), other: positiveInt.default(200_000) })
      .strict()
      .default({ init_tick: 1_000_000, other: 200_000 }),
    /** Wall-clock ms one Lua callback may run (docs/decisions/0021); the maximums are the reference's ceilings. */
    lua_time_budget_ms: z
      .object({ init_tick: positiveInt.max(500).default(30), other: positiveInt.max(200).default(20) })
      .strict()
      .default({ init_tick: 30, other: 20 }),
    /**
     * Wall-clock ms a Lua callback may spend waiting for awaited bindings (a
     * database round trip) without it counting against its deadline; it is
     * also the most those waits may hold the callback's worker beyond it.
     */
    lua_binding_wait_ms: z.number().int().min(0).max(5000).default(250),
    /** MiB one Lua callback may grow the heap (JavaScript heap plus external memory) by. */
    lua_heap_budget_mb: positiveInt.max(4096).default(32),
    /** Ticks in a row on which a match's callbacks hit a limit before it finishes with `script_budget`. */
    match_failing_ticks_max: positiveInt.max(100_000).default(50),
    /** Worker threads for match and RPC scripts; unset: cores − 1, at least 1; 0 runs them on the main thread. */
    match_workers: z.number().int().min(0).max(256).optional(),
    /**
     * Script lanes one world's zones spread over, in stripes along x (decision 0067); unset: every lane,
     * but no stripe narrower than four columns. 1 keeps each world on one lane.
     */
    world_lanes: z.number().int().min(1).max(256).optional(),
    /**
     * Host processes behind the one port (node:cluster), sharing state through the fleet's Redis;
     * `auto` is one per core. Above 1 the boot needs REDIS_URL and DATABASE_URL (host/fleet/workers.ts).
     */
    workers: z.union([z.literal('auto'), z.number().int().min(1).max(256)]).default(1),
    /** Memory (MiB) a script worker may hold; past it the worker is replaced and its matches end `worker_lost`. */
    match_worker_memory_mb: positiveInt.min(64).max(65_536).default(512),
    /** Boot with a game directory that declares no modes (accounts and social features only). */
    allow_empty_game: z.boolean().default(false),
    /** Embedded database only: compile its WebAssembly with V8's baseline tier alone (about 50 MB less memory, slower queries). */
    embedded_memory_saver: z.boolean().default(true),
    /** Cloud saves and storage objects: false makes every `/saves` and `/storage` route answer 404 and leaves `game.storage` out of scripts. */
    storage: z.boolean().default(true),
    /** How often changed leaderboard entries are written to the table (the first write comes within 30 s of boot); a crash loses at most this much. */
    leaderboard_flush_interval_ms: positiveInt.max(3_600_000).default(30_000),
    /** Boards players may submit to over REST: board ids, or `all`; game scripts always may. */
    leaderboard_client_submit: z.union([z.literal('all'), z.array(z.string().min(1).max(255))]).default([]),
    /** Live boards on this node; a submission that would open one more answers 503 `leaderboard.capacity_reached`. */
    leaderboard_max_boards: positiveInt.default(1000),
    /** Per board: `order` (`desc` puts the highest score first) and `operator` (`best` keeps the better score, `set` replaces, `incr` adds). */
    leaderboards: z
      .record(z.string().min(1).max(255), z.object({ order: z.enum(['desc', 'asc']).default('desc'), operator: z.enum(['best', 'set', 'incr']).default('best') }).strict())
      .default({}),
    /** Development aid: check every REST answer and socket reply against its declared schema; a mismatch answers 500 `internal`. */
    response_checks: z.boolean().default(false),
    /** Port of the separate `/metrics` listener (Prometheus text format); unset, nothing listens. 0 picks a free port. */
    metrics_port: z.number().int().min(0).max(65535).optional(),
    /** Address the metrics listener binds; loopback by default, since the figures are for the operator's scraper only. */
    metrics_host: z.string().min(1).max(255).regex(/^[^\s/]+$/, 'must be an address or host name').default('127.0.0.1'),
    /**
     * The operator secret: a bearer for `/api/v1/ops/*` and the key minted
     * operator tokens are signed with (decision 0036). No default: unset, the
     * whole ops plane answers 403. Visible ASCII so it travels as a bearer.
     */
    ops_secret: z
      .string()
      .min(32, 'must be at least 32 characters')
      .max(512)
      .regex(/^[\x21-\x7e]+$/, 'must be visible ASCII without spaces')
      .optional(),
    /** The operator console at `/console` and its session routes; off, every `/console` path answers 404 like an unknown one. */
    console: z.boolean().default(false),
    /** Console sessions may erase players (the `erasure` capability); off, only a bearer credential can. */
    console_erasure: z.boolean().default(false),
    /** The demo page at `/play` (a browser client of the demo arena); on so a fresh checkout shows it, off for production. */
    play: z.boolean().default(true),
    /** Extension module paths (runtime/extensions/extension.ts), loaded in this order; one that fails to load stops the boot. */
    extensions: z.array(z.string().min(1)).default([]),
  })
  .strict();

export type RawSettings = z.input<typeof rawSchema>;

/** Every top-level setting name (the configuration table of docs/operations.md lists each one; a test checks). */
export const SETTING_NAMES: readonly string[] = Object.keys(rawSchema.shape);

export interface Settings extends Omit<z.output<typeof rawSchema>, 'registration' | 'rate_limits' | 'guest_verifier_pepper'> {
  /** Usable peppers by key id (a bare pepper becomes `guest_verifier_key_id`); empty when none qualifies. */
  guest_verifier_pepper: Record<string, string>;
  /** The operator's posture, or null when unset (the game script may then narrow it). */
  registration: RegistrationMode | null;
  /** Every group with the operator's overrides applied. */
  rate_limits: Record<RateLimitGroup, RateRule>;
}

export interface SettingsProblem {
  /** Dotted path of the setting (`rate_limits.api.limit`), or the flag. */
  key: string;
  detail: string;
}

/** Every bad setting at once, so an operator fixes a file in one pass. */
export class SettingsError extends Error {
  readonly problems: SettingsProblem[];

  constructor(key: string, detail: string);
  constructor(problems: SettingsProblem[]);
  constructor(keyOrProblems: string | SettingsProblem[], detail = '') {
    const problems = typeof keyOrProblems === 'string' ? [{ key: keyOrProblems, detail }] : keyOrProblems;
    const listed = problems.map((p) => `'${p.key}': ${p.detail}`).join('; ');
    super(problems.length === 1 ? `invalid setting ${listed}` : `${problems.length} invalid settings: ${listed}`);
    this.name = 'SettingsError';
    this.problems = problems;
  }

  /** The first bad key. */
  get key(): string {
    return this.problems[0]!.key;
  }
}

/** One problem per zod issue, and one per unknown key. */
export function settingsProblems(issues: readonly z.core.$ZodIssue[]): SettingsProblem[] {
  const problems: SettingsProblem[] = [];
  for (const issue of issues) {
    const at = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) problems.push({ key: [...at, key].join('.'), detail: 'unknown setting' });
    } else {
      problems.push({ key: at.join('.') || '(root)', detail: issue.message });
    }
  }
  return problems;
}

export interface SettingsNotice {
  key: string;
  message: string;
}

/**
 * Validates operator settings: any invalid value, a mistyped enum included,
 * throws with every bad key (a typo must not boot with another meaning).
 * Returns the settings and the leniencies kept on purpose (a short pepper
 * counts as absent), reported as notices the host logs at boot.
 */
export function parseSettings(input: unknown): { settings: Settings; notices: SettingsNotice[] } {
  const result = rawSchema.safeParse(input ?? {});
  if (!result.success) throw new SettingsError(settingsProblems(result.error.issues));
  const raw = result.data;
  const notices: SettingsNotice[] = [];
  const registration: RegistrationMode | null = raw.registration ?? null;

  const peppers: Record<string, string> = {};
  const rawPepper = raw.guest_verifier_pepper;
  const given = typeof rawPepper === 'string' ? { [raw.guest_verifier_key_id]: rawPepper } : (rawPepper ?? {});
  for (const [keyId, pepper] of Object.entries(given)) {
    if (new TextEncoder().encode(pepper).byteLength >= MIN_PEPPER_BYTES) peppers[keyId] = pepper;
    else notices.push({ key: `guest_verifier_pepper.${keyId}`, message: `shorter than ${MIN_PEPPER_BYTES} bytes; treated as absent` });
  }

  return {
    settings: {
      ...raw,
      registration,
      guest_verifier_pepper: peppers,
      rate_limits: { ...DEFAULT_RATE_LIMITS, ...raw.rate_limits },
    },
    notices,
  };
}

import type { Ctx } from '../runtime/contracts/context';
import { guestsEnabled } from '../runtime/accounts/guests';
import type { GameInfo } from '../runtime/lua/host-interface';
import { effectiveRegistration } from '../runtime/accounts/registration';
import { OIDC_PROVIDERS } from '../runtime/contracts/settings';

export interface BannerInput {
  version: string;
  url: string;
  configFile: string | null;
  database: { kind: 'embedded'; dataDir: string } | { kind: 'postgres'; url: string };
  gameDir: string;
  game: GameInfo;
  ctx: Pick<Ctx, 'settings' | 'game' | 'identity'>;
}

/**
 * The few lines a person reads when the node starts (the JSON log is for
 * machines): what runs, on what, with which features, and why a feature is off.
 */
export function bootBanner(b: BannerInput): string {
  const rows: [string, string][] = [
    ['settings', b.configFile ?? 'none (every setting at its default)'],
    ['database', b.database.kind === 'embedded' ? `embedded PostgreSQL (PGlite) in ${b.database.dataDir}` : `PostgreSQL at ${redactUrl(b.database.url)}`],
    ['game', `${b.gameDir}: ${describeModes(b.game)}`],
    ['registration', describeRegistration(b.ctx)],
    ['guests', describeGuests(b.ctx)],
    ['providers', describeProviders(b.ctx)],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return [`svc ${b.version} listening on ${b.url} (REST /api/v1, WebSocket /ws)`, ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)].join('\n') + '\n';
}

function describeModes(game: GameInfo): string {
  if (game.modes.size === 0) return 'no modes';
  return [...game.modes.values()]
    .map((m) => (m.kind === 'match' ? `${m.name} (${m.match_size} per match, ${m.strategy})` : `${m.name} (world)`))
    .join(', ');
}

function describeRegistration(ctx: Pick<Ctx, 'settings' | 'game'>): string {
  const { mode, source } = effectiveRegistration(ctx);
  const why = source === 'operator' ? 'the `registration` setting' : source === 'script' ? 'declared by the game script' : 'the default';
  return `${mode} (${why})`;
}

function describeGuests(ctx: Pick<Ctx, 'settings' | 'game'>): string {
  if (guestsEnabled(ctx)) return `enabled (verifier key ${ctx.settings.guest_verifier_key_id})`;
  const declared = ctx.settings.guest_auth ?? ctx.game.guestAuth();
  if (!declared) {
    return ctx.settings.guest_auth === false
      ? 'disabled by the `guest_auth` setting'
      : 'disabled: the game script does not declare `guest_auth = true` and the `guest_auth` setting is unset';
  }
  return `disabled: no \`guest_verifier_pepper\` of 32 bytes or more for key id ${ctx.settings.guest_verifier_key_id}`;
}

function describeProviders(ctx: Pick<Ctx, 'identity'>): string {
  const on = [...OIDC_PROVIDERS, 'steam'].filter((p) => ctx.identity.supports(p));
  return on.length > 0 ? on.join(', ') : 'none (configure `oidc_providers` or `steam_api_key` with `steam_app_id`)';
}

/** A connection string without its password, for logs and boot messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

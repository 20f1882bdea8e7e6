import { version } from '../../package.json';
import { guestsEnabled } from '../accounts/guests';
import { TICKET_PROVIDER } from '../accounts/identities';
import type { Ctx } from '../contracts/context';
import { OIDC_PROVIDERS } from '../contracts/settings';
import type { Features } from '../schemas/ops';

/**
 * `GET /ops/features`: what this node runs, so a console can tell a release
 * it was not built against and hide what is switched off. Each capability is
 * a boolean only: whether a feature is on, never how it is configured.
 */

export const CORE_NAME = 'svc';

export function features(ctx: Pick<Ctx, 'settings' | 'game' | 'identity' | 'extensions'>): Features {
  const s = ctx.settings;
  const on: [string, boolean][] = [
    ['lua', true],
    ['matchmaker', true],
    ['chat', true],
    ['leaderboards', true],
    ['tournaments', true],
    ['economy', true],
    ['votes', true],
    ['worlds', true],
    ['storage', s.storage],
    ['guest_auth', guestsEnabled(ctx)],
    ...[...OIDC_PROVIDERS, TICKET_PROVIDER].map((p): [string, boolean] => [`provider_${p}`, ctx.identity.supports(p)]),
    ['iap_apple', Boolean(s.apple_bundle_id && (s.apple_root_cert_path || s.apple_root_certs?.length))],
    ['iap_google', Boolean(s.google_package_name && (s.google_service_account_key_path || s.google_service_account_key))],
    ['operator_tokens', true],
    ['console', s.console],
    // The host opens its metrics listener exactly when the port is set (or refuses to boot).
    ['metrics', s.metrics_port !== undefined],
  ];
  return {
    core: { name: CORE_NAME, version, capabilities: on.map(([name, enabled]) => ({ name, enabled })) },
    // An extension's capabilities are the seams its manifest declares (checked at boot against what it provides).
    extensions: (ctx.extensions?.list ?? []).map((e) => ({ name: e.name, version: e.version, capabilities: e.seams.map((name) => ({ name, enabled: true })) })),
  };
}

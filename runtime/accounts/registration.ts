import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { RegistrationMode } from '../contracts/settings';

/**
 * Registration posture. The operator's setting wins wherever it
 * is set; only where it is unset may the game script's declaration apply, so a
 * script can narrow a deployment that states nothing but never widen one that
 * does. With neither, registration is open.
 */
export function effectiveRegistration(ctx: Pick<Ctx, 'settings' | 'game'>): {
  mode: RegistrationMode;
  source: 'operator' | 'script' | 'default';
} {
  if (ctx.settings.registration !== null) return { mode: ctx.settings.registration, source: 'operator' };
  const declared = ctx.game.registration();
  if (declared !== null) return { mode: declared, source: 'script' };
  return { mode: 'open', source: 'default' };
}

/** Who is trying to create an account; each registration mode admits some of these. */
export type RegistrationKind = 'password' | 'provider' | 'guest';

/** The shared guard every account-creating path calls before creating anything. */
export function assertRegistrationAllowed(ctx: Pick<Ctx, 'settings' | 'game'>, kind: RegistrationKind): void {
  const { mode } = effectiveRegistration(ctx);
  if (mode === 'closed') throw new ApiError('auth.registration_closed', 'Registration is closed on this deployment.');
  if (mode === 'oauth_only' && kind === 'password') {
    throw new ApiError('auth.password_registration_disabled', 'Password registration is disabled; sign in with a provider.');
  }
}

import { z } from 'zod';
import { charLength } from '../platform/text';
import { base64ToBytes } from '../platform/crypto';
import { byteLength } from '../contracts/frame-envelope';
import { Uuid } from './common';
import { DisplayName, requiredQuery } from './players';
import { coded } from './rules';

/**
 * Accounts: password register and login, the token lifecycle, guests and
 * provider sign-in, link and unlink. Presence is all a request needs to get
 * past the parser; what a credential must look like is checked only where
 * the route's order says (after the client gate and registration posture on
 * register), so a refused request never learns the rules.
 */

const USERNAME_CHARS = /^[A-Za-z0-9_-]*$/;
const DEVICE_ID_MAX_BYTES = 255;
const SECRET_MIN_BYTES = 32;
const SECRET_MAX_BYTES = 128;

/** Both rules report together, so a client fixes a name in one round. */
export const Username = z
  .string()
  .refine((s) => {
    const n = charLength(s);
    return n >= 3 && n <= 32;
  }, 'must be 3 to 32 characters')
  .refine((s) => USERNAME_CHARS.test(s), 'may contain only letters, digits, underscore and hyphen')
  .meta({ description: '3-32 characters: letters, digits, underscore and hyphen' });

/** Counted in characters as a person counts them, so any script fits the same bounds. */
export const Password = z
  .string()
  .refine((s) => {
    const n = charLength(s);
    return n >= 8 && n <= 128;
  }, 'must be 8 to 128 characters')
  .meta({ description: '8-128 characters' });

/** What a new password account's credentials must pass (register, guest upgrade). */
export const NewCredentials = z.object({ username: Username, password: Password });
export type NewCredentials = z.output<typeof NewCredentials>;

/** A new password account; an absent or null display name means the username. */
export const NewAccount = NewCredentials.extend({
  display_name: DisplayName.nullish().transform((name) => name ?? undefined),
});
export type NewAccount = z.output<typeof NewAccount>;

/**
 * `POST /auth/register` as the route first reads it: the credentials present
 * as strings. `NewAccount` applies after the client gate and the posture.
 */
export const RegisterRequest = z.object({
  username: z.string().meta({ description: Username.description }),
  password: z.string().meta({ description: Password.description }),
  display_name: z.unknown().optional().meta({ type: ['string', 'null'], description: `${DisplayName.description}; absent or null means the username` }),
});

/** `POST /auth/login`: no rules, so a refusal says nothing about what names exist or look like. */
export const PasswordLogin = z.object({ username: z.string(), password: z.string() });
export type PasswordLogin = z.output<typeof PasswordLogin>;

export const RefreshRequest = z.object({ refresh_token: z.string() });

/** `POST /auth/logout`: whatever else it is sent, the bearer goes too. */
export const LogoutRequest = z.object({ refresh_token: z.string().optional() });

/**
 * `POST /auth/guest`: a device and the secret only it knows. Each shape
 * problem answers its own code, so a client library can tell a bad id from a
 * weak secret.
 */
export const GuestDevice = z.object({
  device_id: z
    .string()
    .refine((id) => {
      const n = byteLength(id);
      return n >= 1 && n <= DEVICE_ID_MAX_BYTES;
    }, coded('guest.invalid_device_id', `device_id must be 1 to ${DEVICE_ID_MAX_BYTES} bytes.`, { field: 'device_id' }))
    .meta({ description: `1-${DEVICE_ID_MAX_BYTES} bytes` }),
  device_secret: z
    .string()
    .transform((text) => base64ToBytes(text))
    .refine(
      (bytes) => bytes !== null && bytes.length >= SECRET_MIN_BYTES && bytes.length <= SECRET_MAX_BYTES,
      coded('guest.weak_device_secret', `device_secret must be base64 of ${SECRET_MIN_BYTES} to ${SECRET_MAX_BYTES} random bytes.`, {
        field: 'device_secret',
      }),
    )
    .transform((bytes) => bytes!)
    .meta({ description: `base64 (standard or url-safe) of ${SECRET_MIN_BYTES}-${SECRET_MAX_BYTES} random bytes` }),
});
export type GuestDevice = z.output<typeof GuestDevice>;

/** `POST /auth/oauth` and `POST /auth/link`: a provider's name and the token or ticket it issued. */
export const ProviderToken = z.object({
  provider: z.string().meta({ description: 'google, apple, microsoft, discord or steam, as the deployment configures them' }),
  token: z.string().meta({ description: 'an ID token (OIDC providers) or a session ticket (steam)' }),
});
export type ProviderToken = z.output<typeof ProviderToken>;

/** `DELETE /auth/unlink?provider=`: a DELETE body is never read. */
export const ProviderQuery = z.object({ provider: requiredQuery('provider') });

export const TokenPair = z.object({ access_token: z.string(), refresh_token: z.string() });
export type TokenPair = z.output<typeof TokenPair>;

/** The answer of every sign-in route. */
export const SignIn = TokenPair.extend({ player_id: Uuid, username: z.string() });
export type SignIn = z.output<typeof SignIn>;

export const GuestSignIn = SignIn.extend({ guest: z.literal(true), created: z.literal(true).optional() });
export type GuestSignIn = z.output<typeof GuestSignIn>;

export const GuestUpgraded = SignIn.extend({ upgraded: z.literal(true) });
export type GuestUpgraded = z.output<typeof GuestUpgraded>;

export const ProviderSignIn = SignIn.extend({ created: z.literal(true).optional() });
export type ProviderSignIn = z.output<typeof ProviderSignIn>;

export const Linked = z.object({ provider: z.string(), provider_uid: z.string(), linked: z.literal(true) });
export type Linked = z.output<typeof Linked>;

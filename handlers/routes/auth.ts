import { loginWithPassword, registerWithPassword } from '../../runtime/accounts/accounts';
import { passClientGate } from '../../runtime/accounts/client-gate';
import { assertRegistrationAllowed } from '../../runtime/accounts/registration';
import { LogoutRequest, NewAccount, PasswordLogin, RefreshRequest, RegisterRequest, SignIn, TokenPair } from '../../runtime/schemas/accounts';
import { Success } from '../../runtime/schemas/common';
import { revokeSession, rotateRefreshToken } from '../../runtime/accounts/tokens';
import { route, type Route } from '../contract';
import { restInput } from '../../runtime/schemas/input';

/** Password sign-in and the token lifecycle. */
export const authRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/auth/register',
    summary: 'Create a password account and sign it in',
    tag: 'accounts',
    auth: 'none',
    rate: 'register',
    body: RegisterRequest,
    legacyKey: 'fields',
    response: SignIn,
    errors: [
      'client_gate_denied',
      'auth.registration_closed',
      'auth.password_registration_disabled',
      'auth.username_taken',
      'auth.token_issue_failed',
    ],
    handle: async ({ ctx, body, call, request }) => {
      // Presence first (the body schema), then the gate, the posture and only
      // then the account rules: a request refused early learns nothing of them.
      await passClientGate(ctx, request, call.ip);
      assertRegistrationAllowed(ctx, 'password');
      return registerWithPassword(ctx, restInput(NewAccount, body, 'body', 'fields'));
    },
  }),
  route({
    method: 'POST',
    path: '/api/v1/auth/login',
    summary: 'Sign in with username and password',
    tag: 'accounts',
    auth: 'none',
    rate: 'auth',
    body: PasswordLogin,
    legacyKey: 'fields',
    response: SignIn,
    errors: ['auth.invalid_credentials', 'auth.token_issue_failed'],
    handle: ({ ctx, body }) => loginWithPassword(ctx, body),
  }),
  route({
    method: 'POST',
    path: '/api/v1/auth/refresh',
    summary: 'Trade a refresh token for a new pair (single use)',
    tag: 'accounts',
    auth: 'none',
    rate: 'auth',
    body: RefreshRequest,
    legacyKey: 'fields',
    response: TokenPair,
    errors: ['unauthenticated'],
    handle: ({ ctx, body }) => rotateRefreshToken(ctx, body.refresh_token),
  }),
  route({
    method: 'POST',
    path: '/api/v1/auth/logout',
    summary: 'Revoke the refresh token family and the bearer token; answers the same whatever it finds',
    tag: 'accounts',
    auth: 'none',
    rate: 'auth',
    body: LogoutRequest,
    lenientBody: true,
    legacyKey: 'fields',
    response: Success,
    errors: [],
    handle: async ({ ctx, body, call }) => {
      await revokeSession(ctx, body.refresh_token ?? null, call.bearer);
      return { success: true as const };
    },
  }),
];

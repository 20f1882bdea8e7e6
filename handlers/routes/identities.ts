import { passClientGate } from '../../runtime/accounts/client-gate';
import { linkProvider, signInWithProvider, unlinkProvider } from '../../runtime/accounts/identities';
import { Linked, ProviderQuery, ProviderSignIn, ProviderToken } from '../../runtime/schemas/accounts';
import { Success } from '../../runtime/schemas/common';
import { route, type Route } from '../contract';

/** Provider sign-in, link and unlink. */
export const identityRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/auth/oauth',
    summary: 'Sign in with a provider token, creating the account on first use',
    tag: 'accounts',
    auth: 'none',
    rate: 'auth',
    body: ProviderToken,
    legacyKey: 'fields',
    response: ProviderSignIn,
    errors: [
      'client_gate_denied',
      'auth.unsupported_provider',
      'auth.provider_rejected',
      'auth.registration_closed',
      'auth.already_registering',
      'auth.registration_failed',
      'auth.token_issue_failed',
    ],
    handle: async ({ ctx, body, call, request }) => {
      // Before any call to the provider.
      await passClientGate(ctx, request, call.ip, body.token);
      return signInWithProvider(ctx, body);
    },
  }),
  route({
    method: 'POST',
    path: '/api/v1/auth/link',
    summary: "Add a provider identity to the caller's account",
    tag: 'accounts',
    auth: 'player',
    rate: 'auth',
    body: ProviderToken,
    legacyKey: 'fields',
    response: Linked,
    errors: ['auth.unsupported_provider', 'auth.provider_rejected', 'auth.provider_already_linked', 'auth.link_failed'],
    handle: ({ ctx, player, body }) => linkProvider(ctx, player.playerId, body),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/auth/unlink',
    summary: "Remove the caller's identities of one provider, unless they are the last way to sign in",
    tag: 'accounts',
    auth: 'player',
    rate: 'auth',
    query: ProviderQuery,
    legacyKey: 'fields',
    response: Success,
    errors: ['missing_field', 'auth.identity_not_found', 'auth.last_auth_method'],
    handle: async ({ ctx, player, query }) => {
      await unlinkProvider(ctx, player.playerId, query.provider);
      return { success: true as const };
    },
  }),
];

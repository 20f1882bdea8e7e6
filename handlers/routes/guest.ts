import { passClientGate } from '../../runtime/accounts/client-gate';
import { assertGuestsEnabled, signInAsGuest, upgradeGuest } from '../../runtime/accounts/guests';
import { GuestDevice, GuestSignIn, GuestUpgraded, NewCredentials } from '../../runtime/schemas/accounts';
import { route, type Route } from '../contract';

/** Guest sign-in and upgrade to a password account. */
export const guestRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/auth/guest',
    // Whether guests exist is the first thing a client needs to learn.
    precondition: assertGuestsEnabled,
    summary: 'Sign in as the guest of a device, creating it on first use',
    tag: 'accounts',
    auth: 'none',
    rate: 'auth',
    body: GuestDevice,
    legacyKey: 'fields',
    response: GuestSignIn,
    errors: [
      'guest.disabled',
      'guest.invalid_device_id',
      'guest.weak_device_secret',
      'client_gate_denied',
      'guest.invalid_device_secret',
      'guest.revoked',
      'guest.already_upgraded',
      'guest.rate_limited',
      'guest.capacity_reached',
      'guest.unavailable',
      'guest.device_already_registered',
      'guest.create_failed',
      'auth.registration_closed',
      'auth.token_issue_failed',
    ],
    handle: async ({ ctx, body, call, request }) => {
      // After the shape checks, before the verifier's hash.
      await passClientGate(ctx, request, call.ip);
      return signInAsGuest(ctx, body);
    },
  }),
  route({
    method: 'POST',
    path: '/api/v1/auth/guest/upgrade',
    precondition: assertGuestsEnabled,
    summary: "Turn the caller's unclaimed guest into a password account",
    tag: 'accounts',
    auth: 'player',
    rate: 'auth',
    body: NewCredentials,
    legacyKey: 'fields',
    response: GuestUpgraded,
    errors: ['guest.disabled', 'player.not_found', 'guest.not_unclaimed', 'auth.username_taken', 'auth.token_issue_failed'],
    handle: ({ ctx, player, body }) => upgradeGuest(ctx, player.playerId, body),
  }),
];


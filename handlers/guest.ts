import { passClientGate } from '../runtime/client-gate';
import { assertGuestsEnabled, readDeviceCredential, signInAsGuest, upgradeGuest } from '../runtime/guests';
import { readJsonObject, requireString } from './body';
import { json, requirePlayer, type Route } from './http';

/** Guest sign-in and upgrade to a password account. */
export const guestRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/auth/guest',
    handler: async (request, ctx, call) => {
      assertGuestsEnabled(ctx);
      const body = await readJsonObject(request);
      const deviceId = requireString(body, 'device_id');
      const deviceSecret = requireString(body, 'device_secret');
      const credential = readDeviceCredential(deviceId, deviceSecret);
      // After the limiter (pipeline), before the verifier's hash.
      await passClientGate(ctx, request, call.ip);
      return json(await signInAsGuest(ctx, credential));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/auth/guest/upgrade',
    handler: async (request, ctx, call) => {
      assertGuestsEnabled(ctx);
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      const username = requireString(body, 'username');
      const password = requireString(body, 'password');
      return json(await upgradeGuest(ctx, playerId, username, password));
    },
  },
];

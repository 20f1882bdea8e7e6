import { loginWithPassword, registerWithPassword } from '../runtime/accounts';
import { passClientGate } from '../runtime/client-gate';
import { revokeSession, rotateRefreshToken } from '../runtime/tokens';
import { readJsonObject, requireString } from './body';
import { json, type Route } from './http';

/** Password sign-in and the token lifecycle. */


export const authRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/auth/register',
    handler: async (request, ctx, call) => {
      const body = await readJsonObject(request);
      const username = requireString(body, 'username');
      const password = requireString(body, 'password');
      await passClientGate(ctx, request, call.ip);
      const signIn = await registerWithPassword(ctx, {
        username,
        password,
        ...(body.display_name !== undefined && body.display_name !== null ? { displayName: body.display_name } : {}),
      });
      return json(signIn);
    },
  },
  {
    method: 'POST',
    path: '/api/v1/auth/login',
    handler: async (request, ctx) => {
      const body = await readJsonObject(request);
      const username = requireString(body, 'username');
      const password = requireString(body, 'password');
      return json(await loginWithPassword(ctx, username, password));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/auth/refresh',
    handler: async (request, ctx) => {
      const body = await readJsonObject(request);
      const pair = await rotateRefreshToken(ctx, requireString(body, 'refresh_token'));
      return json({ access_token: pair.access_token, refresh_token: pair.refresh_token });
    },
  },
  {
    method: 'POST',
    path: '/api/v1/auth/logout',
    handler: async (request, ctx, call) => {
      // Logout answers 200 whatever it is sent: an
      // unreadable body is the same as none.
      let body: Record<string, unknown> = {};
      try {
        body = await readJsonObject(request);
      } catch {
        body = {};
      }
      const refresh = typeof body.refresh_token === 'string' ? body.refresh_token : null;
      await revokeSession(ctx, refresh, call.bearer);
      return json({ success: true });
    },
  },
];

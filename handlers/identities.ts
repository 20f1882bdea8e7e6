import { passClientGate } from '../runtime/client-gate';
import { missingField } from '../runtime/errors';
import { linkProvider, signInWithProvider, unlinkProvider } from '../runtime/identities';
import { readJsonObject, requireString } from './body';
import { json, requirePlayer, type Route } from './http';
import { queryParam } from './pagination';

/** Provider sign-in, link and unlink. */
export const identityRoutes: Route[] = [
  {
    method: 'POST',
    path: '/api/v1/auth/oauth',
    handler: async (request, ctx, call) => {
      const body = await readJsonObject(request);
      const provider = requireString(body, 'provider');
      const token = requireString(body, 'token');
      // After the limiter (pipeline), before any call to the provider.
      await passClientGate(ctx, request, call.ip, token);
      return json(await signInWithProvider(ctx, provider, token));
    },
  },
  {
    method: 'POST',
    path: '/api/v1/auth/link',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      const body = await readJsonObject(request);
      const provider = requireString(body, 'provider');
      const token = requireString(body, 'token');
      return json(await linkProvider(ctx, playerId, provider, token));
    },
  },
  {
    method: 'DELETE',
    path: '/api/v1/auth/unlink',
    handler: async (request, ctx, call) => {
      const { playerId } = requirePlayer(call);
      // The provider comes from the query string only: a DELETE body is never read.
      const provider = queryParam(request.query, 'provider');
      if (!provider) throw missingField('provider');
      await unlinkProvider(ctx, playerId, provider);
      return json({ success: true });
    },
  },
];

import { z } from 'zod';
import { CAPABILITIES } from '../../runtime/contracts/capabilities';
import { ConsoleSignIn, endConsoleSession, openConsoleSession, readConsoleSession } from '../../runtime/ops/console-sessions';
import { Success } from '../../runtime/schemas/common';
import { Answer, route, type Route } from '../contract';
import { consoleCookies } from '../pipeline/operator-caller';

const ConsoleSessionOpened = z.object({
  data: z.object({
    display: z.string(),
    expires_at: z.number().int().meta({ description: 'epoch seconds; absolute, never extended' }),
    csrf: z.string().meta({ description: 'the value every later console request sends in `x-csrf-token` (also in the `svc_console_csrf` cookie)' }),
  }),
});

const ConsoleSessionView = z.object({
  data: z.object({
    display: z.string(),
    source: z.literal('console'),
    caps: z.array(z.enum(CAPABILITIES)),
    attested: z.boolean(),
  }),
});

/**
 * The operator console's browser session (`/console/session`), outside `/api/v1` and
 * not behind the ops credential. The console itself is served by the Node
 * host; these routes are the library's, so any host keeping a session store
 * can offer them. Every one answers the unknown-path 404 while `console` is off.
 */
export const consoleRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/console/session',
    summary: 'Open a console session with the operator secret; sets the `svc_console` (HttpOnly) and `svc_console_csrf` cookies',
    tag: 'console',
    auth: 'none',
    rate: 'auth',
    body: ConsoleSignIn,
    response: ConsoleSessionOpened,
    errors: ['forbidden', 'not_found'],
    handle: async ({ ctx, body, request, call }) => {
      const h = request.headers;
      const from = { contentType: h.get('content-type'), origin: h.get('origin'), fetchSite: h.get('sec-fetch-site'), host: h.get('host') };
      const opened = await openConsoleSession(ctx, body, from, call.secure);
      return new Answer(opened.body, 200, { 'set-cookie': opened.cookies });
    },
  }),
  route({
    method: 'GET',
    path: '/console/session',
    summary: 'Who this browser is; needs the session cookie and the `x-csrf-token` header',
    tag: 'console',
    auth: 'none',
    rate: 'api',
    response: ConsoleSessionView,
    errors: ['unauthenticated', 'forbidden', 'not_found'],
    handle: ({ ctx, request, call }) => readConsoleSession(ctx, consoleCookies(request, call.secure)),
  }),
  route({
    method: 'DELETE',
    path: '/console/session',
    summary: 'End the console session (cookie only); answers the same whatever it finds',
    tag: 'console',
    auth: 'none',
    rate: 'api',
    response: Success,
    errors: ['not_found'],
    handle: async ({ ctx, request, call }) => {
      const ended = await endConsoleSession(ctx, consoleCookies(request, call.secure));
      return new Answer(ended.body, 200, { 'set-cookie': ended.cookies });
    },
  }),
];

import { apiDocumentRoutes } from './api-documents';
import { authRoutes } from './auth';
import { chatRoutes } from './chat';
import { dmRoutes } from './dm';
import { friendRoutes } from './friends';
import { groupRoutes } from './groups';
import { guestRoutes } from './guest';
import { healthRoutes } from './health';
import type { Route } from './contract';
import { identityRoutes } from './identities';
import { matchmakerRoutes } from './matchmaker';
import { matchRoutes } from './matches';
import { notificationRoutes } from './notifications';
import { playerRoutes } from './players';
import { rpcRoutes } from './rpc';

/** Every REST route of the handler library, mounted by `createApp`. */
export function allRoutes(): Route[] {
  const routes: Route[] = [];
  routes.push(...apiDocumentRoutes(() => routes), ...healthRoutes, ...authRoutes, ...guestRoutes, ...identityRoutes, ...playerRoutes, ...matchRoutes, ...matchmakerRoutes, ...rpcRoutes, ...socialRoutes());
  return routes;
}

/** Friends, groups, chat history, direct messages, notifications. */
function socialRoutes(): Route[] {
  return [...friendRoutes, ...groupRoutes, ...chatRoutes, ...dmRoutes, ...notificationRoutes];
}

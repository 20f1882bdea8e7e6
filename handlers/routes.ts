import { apiDocumentRoutes } from './routes/api-documents';
import { authRoutes } from './routes/auth';
import { chatRoutes } from './routes/social/chat';
import { consoleRoutes } from './routes/console';
import { dmRoutes } from './routes/social/dm';
import { economyRoutes } from './routes/economy';
import { friendRoutes } from './routes/social/friends';
import { groupRoutes } from './routes/social/groups';
import { guestRoutes } from './routes/guest';
import { healthRoutes } from './routes/health';
import type { Route } from './contract';
import { iapRoutes } from './routes/iap';
import { leaderboardRoutes } from './routes/leaderboards';
import { identityRoutes } from './routes/identities';
import { matchmakerRoutes } from './routes/matchmaker';
import { matchRoutes } from './routes/matches';
import { notificationRoutes } from './routes/social/notifications';
import { opsRoutes } from './routes/ops';
import { playerRoutes } from './routes/players';
import { rpcRoutes } from './routes/rpc';
import { saveRoutes } from './routes/saves';
import { voteRoutes } from './routes/votes';
import { storageRoutes } from './routes/storage';
import { tournamentRoutes } from './routes/tournaments';
import { worldRoutes } from './routes/worlds';

/** Every REST route of the handler library, mounted by `createApp`. */
export function allRoutes(): Route[] {
  const routes: Route[] = [];
  routes.push(...apiDocumentRoutes(() => routes), ...healthRoutes, ...authRoutes, ...guestRoutes, ...identityRoutes, ...playerRoutes, ...matchRoutes, ...worldRoutes, ...matchmakerRoutes, ...rpcRoutes, ...iapRoutes, ...socialRoutes(), ...economyRoutes, ...leaderboardRoutes, ...saveRoutes, ...storageRoutes, ...tournamentRoutes, ...voteRoutes, ...opsRoutes, ...consoleRoutes);
  return routes;
}

/** Friends, groups, chat history, direct messages, notifications. */
function socialRoutes(): Route[] {
  return [...friendRoutes, ...groupRoutes, ...chatRoutes, ...dmRoutes, ...notificationRoutes];
}

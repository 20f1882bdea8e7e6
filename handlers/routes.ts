import { authRoutes } from './auth';
import { healthRoutes } from './health';
import type { Route } from './http';
import { matchmakerRoutes } from './matchmaker';
import { matchRoutes } from './matches';
import { playerRoutes } from './players';

/** Every REST route of the handler library, mounted by `createApp`. */
export function allRoutes(): Route[] {
  return [...healthRoutes, ...authRoutes, ...playerRoutes, ...matchRoutes, ...matchmakerRoutes];
}

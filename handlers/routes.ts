import { healthRoutes } from './health';
import type { Route } from './http';

/** Every REST route of the handler library, mounted by `createApp`. */
export function allRoutes(): Route[] {
  return [...healthRoutes];
}

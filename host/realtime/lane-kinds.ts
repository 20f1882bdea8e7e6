/**
 * Every kind of script the lanes run, each with the handler it registers.
 * The worker entry (lanes/worker.ts) and the main thread's own lane
 * (`match_workers: 0`) build their runners from this one table, so a kind
 * added here runs the same way in both.
 */
import type { LaneKinds } from './lanes/runner';
import { MatchLane } from './match/match-lane';
import { WorldLane } from './world/world-lane';
import { RpcLane } from './rpc-lane';

export const LANE_KINDS: LaneKinds = {
  match: (lane) => new MatchLane(lane),
  world: (lane) => new WorldLane(lane),
  rpc: (lane) => new RpcLane(lane),
};

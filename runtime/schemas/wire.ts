import { z } from 'zod';
import { chatFrames, chatPushes } from './chat';
import { ErrorObject } from './common';
import { dmFrames, dmPushes } from './dm';
import type { ClientFrameContract, PushContract } from './frame-contract';
import { matchFrames, matchPushes } from './matches';
import { matchmakerFrames, matchmakerPushes } from './matchmaker';
import { modulePushes } from './modules';
import { notificationPushes } from './notifications';
import { presenceFrames, presencePushes } from './presence';
import { rpcFrames } from './rpc';
import { sessionConnect, sessionHeartbeat } from './session';
import { voteFrames, votePushes } from './votes';
import { worldFrames, worldPushes } from './worlds';

/**
 * Every WebSocket message the service speaks: the client frames the gateway
 * routes and the pushes it sends. The AsyncAPI document is generated from
 * these lists, and a test checks that the gateway routes exactly the client frames.
 */
export const clientFrames: readonly ClientFrameContract[] = [
  sessionConnect,
  sessionHeartbeat,
  ...matchmakerFrames,
  ...matchFrames,
  ...worldFrames,
  ...rpcFrames,
  ...chatFrames,
  ...dmFrames,
  ...presenceFrames,
  ...voteFrames,
];

export const serverPushes: readonly PushContract[] = [...matchmakerPushes, ...matchPushes, ...modulePushes, ...worldPushes, ...chatPushes, ...dmPushes, ...notificationPushes, ...presencePushes, ...votePushes];

/** Every `error` frame's payload: the failure of a client frame, or a notice without its `cid`. */
export const ErrorFramePayload = z.object({
  type: z.string().optional(),
  reason: z.string(),
  error: ErrorObject.shape.error,
});

import { z } from 'zod';
import { EpochMs, Uuid } from './common';
import { clientFrame } from './frame-contract';

/** `session.connect`: a missing payload or token counts as a bad token (`invalid_token`), not a malformed frame. */
export const sessionConnect = clientFrame({
  type: 'session.connect',
  summary: 'Bind the socket to the player an access token names. `wire: "binary"` asks for `world.tick` as binary WebSocket frames (every other frame stays text); the reply says which wire was granted.',
  auth: false,
  payload: z.object({
    token: z.string().min(1),
    // Anything but "binary" is the text wire, as on the reference: an SDK's unexpected value must not cost it the session.
    wire: z.enum(['json', 'binary']).optional().catch(undefined).meta({ description: 'the wire to send `world.tick` on; default `json`' }),
  }),
  absent: 'empty',
  missing: 'invalid_token',
  invalid: 'invalid_token',
  notObject: 'invalid_token',
  reply: {
    type: 'session.connected',
    payload: z.object({
      player_id: Uuid,
      wire: z.enum(['json', 'binary']).meta({ description: '`binary` only when asked for and the operator\'s `binary_wire` is on' }),
    }),
  },
});

export const sessionHeartbeat = clientFrame({
  type: 'session.heartbeat',
  summary: 'Keep the socket alive; answers the server time.',
  auth: false,
  payload: z.object({}),
  absent: 'empty',
  missing: 'invalid_payload',
  reply: { type: 'session.heartbeat', payload: z.object({ ts: EpochMs }) },
});

import type { z } from 'zod';

/**
 * A WebSocket message as a contract. Client frames declare their payload
 * schema (the same one the REST twin of the message uses), how failures the
 * schema cannot tell apart are answered, and their reply; server pushes
 * declare their payload. The gateway validates every routed frame against
 * its contract, the AsyncAPI document is generated from the contracts, and in
 * tests every reply is checked against its declared schema.
 */
export interface ClientFrameContract<P extends z.ZodType = z.ZodType> {
  type: string;
  summary: string;
  /** Needs a successful `session.connect`; before it the frame is `unknown_type`. */
  auth: boolean;
  payload: P;
  /**
   * A frame sent without `payload`: `unknown_type` for most frames, or read
   * as `{}` for the ones that need nothing (`absent: 'empty'`).
   */
  absent: 'unknown_type' | 'empty';
  /** The reason an absent required key answers (the wire references fix it per frame). */
  missing: string;
  /** The reason a key present with a bad value answers; default `invalid_payload`. */
  invalid?: string;
  /** The reason a payload that is not an object answers; default `invalid_payload`. */
  notObject?: string;
  /** Errors of this frame carry `payload.type` (matchmaker frames). */
  typed?: boolean;
  /** The reply on success, or none (the frame answers only failures). */
  reply: { type: string; payload: z.ZodType } | null;
}

export interface PushContract {
  type: string;
  summary: string;
  payload: z.ZodType;
}

/** Declares a client frame; the payload's parsed type flows to the handler. */
export function clientFrame<P extends z.ZodType>(contract: ClientFrameContract<P>): ClientFrameContract<P> {
  return contract;
}

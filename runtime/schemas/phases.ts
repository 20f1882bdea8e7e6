import { z } from 'zod';

/**
 * Where an instance's phases stand, cut down for listings: the same block
 * on live matches and on worlds (only for modes that declare phases).
 */
export const PhaseListing = z.object({
  status: z.enum(['waiting', 'active', 'complete']),
  phase: z.string().nullable(),
  remaining_ms: z.number().int().nullable().optional(),
  start_condition: z.union([z.string(), z.object({ type: z.string(), value: z.number() })]).optional(),
});
export type PhaseListing = z.output<typeof PhaseListing>;

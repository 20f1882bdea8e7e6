import { z } from 'zod';
import { idOf, IsoTime, Success, Uuid } from './common';
import { clientFrame, type PushContract } from './frame-contract';
import { ruled } from './rules';

/**
 * Votes on the wire: the `vote.*` frames a player answers a vote with, the
 * `match.vote_*` pushes, and the stored votes over REST.
 */

export const VoteMethod = z.enum(['plurality', 'approval', 'weighted', 'ranked']);
export const VoteVisibility = z.enum(['live', 'hidden']);
/** Every stored vote is closed; only `resolved` ones have a result the players saw. */
export const VoteStatus = z.enum(['resolved', 'vetoed', 'cancelled']);
export type VoteStatus = z.output<typeof VoteStatus>;

const Counts = z.record(z.string(), z.number());
const VoteOption = z.object({ id: z.string(), label: z.string() });
/** An option id, or a list of them for approval (the approved ones) and ranked (best first). */
const Choice = z.union([z.string(), z.array(z.string())]);

// ---- frames ------------------------------------------------------------------

export const VoteCast = z.object({
  vote_id: ruled(z.string(), { invalidReason: 'vote_not_found' }),
  option_id: ruled(Choice, { invalidReason: 'invalid_option' }),
});
export type VoteCast = z.output<typeof VoteCast>;

export const VoteVeto = z.object({ vote_id: ruled(z.string(), { invalidReason: 'vote_not_found' }) });
export type VoteVeto = z.output<typeof VoteVeto>;

export const voteCast = clientFrame({
  type: 'vote.cast',
  summary: 'Cast or change a vote in the match this socket plays in; a voter may change it `max_revotes` times.',
  auth: true,
  payload: VoteCast,
  absent: 'unknown_type',
  missing: 'missing_field',
  reply: { type: 'vote.cast_ok', payload: Success },
});

export const voteVeto = clientFrame({
  type: 'vote.veto',
  summary: 'Spend one of the match\'s veto tokens to cancel a veto-enabled vote.',
  auth: true,
  payload: VoteVeto,
  absent: 'unknown_type',
  missing: 'missing_field',
  reply: { type: 'vote.veto_ok', payload: Success },
});

export const voteFrames = [voteCast, voteVeto];

// ---- pushes ------------------------------------------------------------------

/** What everyone in the match learns when a vote closes; `winner` null with `status` saying why. */
export const VoteResultPush = z.object({
  vote_id: Uuid,
  winner: z.string().nullable(),
  counts: Counts,
  distribution: Counts,
  total_votes: z.number().int(),
  turnout: z.number(),
  status: z.enum(['no_quorum', 'no_consensus']).optional(),
});

export const votePushes: PushContract[] = [
  {
    type: 'match.vote_start',
    summary: 'The match opened a vote.',
    payload: z.object({ vote_id: Uuid, options: z.array(VoteOption), window_ms: z.number().int(), method: VoteMethod }),
  },
  {
    type: 'match.vote_tally',
    summary: 'After each accepted cast of a `live` vote: the running counts.',
    payload: z.object({ vote_id: Uuid, tallies: Counts, time_remaining_ms: z.number().int(), total_votes: z.number().int() }),
  },
  { type: 'match.vote_result', summary: 'A vote closed: its winner (null without quorum or consensus) and counts.', payload: VoteResultPush },
  { type: 'match.vote_vetoed', summary: 'A player spent a veto: the vote is cancelled.', payload: z.object({ vote_id: Uuid, vetoed_by: Uuid }) },
];

// ---- REST --------------------------------------------------------------------

/** A stored vote. `votes_cast` (voter id → choice) is absent while a `hidden` vote is not `resolved`. */
export const Vote = z.object({
  id: Uuid,
  match_id: Uuid,
  template: z.string(),
  method: VoteMethod,
  visibility: VoteVisibility,
  status: VoteStatus,
  options: z.array(VoteOption),
  votes_cast: z.record(z.string(), Choice).optional(),
  result: z.record(z.string(), z.unknown()),
  distribution: Counts,
  turnout: z.number(),
  eligible_count: z.number().int(),
  window_ms: z.number().int(),
  opened_at: IsoTime.nullable(),
  closed_at: IsoTime.nullable(),
  inserted_at: IsoTime,
});
export type Vote = z.output<typeof Vote>;

export const VoteList = z.object({ votes: z.array(Vote) });

export const VoteId = z.object({ id: idOf('vote.not_found', 'vote') });
export const VoteMatchId = z.object({ id: idOf('forbidden', 'match') });

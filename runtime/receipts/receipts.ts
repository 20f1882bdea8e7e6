import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import type { VerifiedReceipt } from '../contracts/services';
import { databaseFault, isUniqueViolation } from '../platform/database';
import { registerErasable } from '../changes/erasure';
import { isStorableText } from '../platform/text';
import type { AppleReceipt, AppleReceiptResult, GoogleReceipt, GoogleReceiptResult } from '../schemas/iap';

/**
 * Store receipts: verify with the store, then record the transaction once.
 * Nothing is granted here; a game grants from its own code after a client
 * shows it a verified receipt. The unique (provider, transaction_id) pair is
 * what makes a receipt count for one player only, whoever asks first.
 */

// An erased player's receipts stay, severed, so the transaction stays claimed.
registerErasable({ table: 'iap_transactions', column: 'player_id', mode: 'nullify' });

export type StoreProvider = 'apple' | 'google';

/** A store's refusal: the code is fixed; the store's story travels as a label in `details.reason`. */
export function verificationFailed(reason: string): ApiError {
  return new ApiError('iap.verification_failed', 'The store did not verify the receipt.', { reason });
}

/** Longest store id recorded; a longer one counts as absent (the columns hold 255). */
const STORE_ID_MAX = 255;

/**
 * A store's id as text we can record and answer with: a non-empty string
 * (or an integer, which some payloads use), storable and at most 255
 * characters; anything else is absent.
 */
export function storeText(value: unknown): string | null {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || text === '' || text.length > STORE_ID_MAX || !isStorableText(text)) return null;
  return text;
}

/** What the store payload lacked is answered as the string "undefined", as the clients of this API expect. */
export const ABSENT = 'undefined';

export async function claimAppleReceipt(ctx: Ctx, playerId: string, body: AppleReceipt): Promise<AppleReceiptResult> {
  const receipt = await ctx.receipts.apple(body.signed_transaction);
  return { ...receipt.view, duplicate: await record(ctx, playerId, 'apple', receipt) };
}

export async function claimGoogleReceipt(ctx: Ctx, playerId: string, body: GoogleReceipt): Promise<GoogleReceiptResult> {
  const receipt = await ctx.receipts.google(body.product_id, body.purchase_token);
  return { ...receipt.view, duplicate: await record(ctx, playerId, 'google', receipt) };
}

/**
 * Records the transaction for the player; true when the player had recorded
 * it already. A transaction someone else holds (an erased player included)
 * answers 409. Of two concurrent first submissions the insert of one waits
 * on the other's and then finds its row.
 */
async function record(ctx: Ctx, playerId: string, provider: StoreProvider, receipt: VerifiedReceipt<unknown>): Promise<boolean> {
  const transactionId = receipt.transactionId;
  if (transactionId === null) throw new ApiError('iap.missing_transaction_id', 'The verified receipt carries no transaction id.');
  let inserted: boolean;
  try {
    // One statement, so no transaction around it: the insert is the whole mutation.
    const row = await ctx.db
      .insertInto('iap_transactions')
      .values({
        id: ctx.ids.uuid(),
        player_id: playerId,
        provider,
        transaction_id: transactionId,
        original_transaction_id: receipt.originalTransactionId,
        product_id: receipt.productId,
      })
      .onConflict((c) => c.columns(['provider', 'transaction_id']).doNothing())
      .returning('id')
      .executeTakeFirst();
    inserted = row !== undefined;
  } catch (err) {
    if (databaseFault(err) !== null) throw err;
    // A failed insert may still have lost to a row that exists now; only when none does is it ours to report.
    if (!isUniqueViolation(err)) ctx.log.error('iap_record_failed', { provider, player_id: playerId, error: err instanceof Error ? err.message : String(err) });
    inserted = false;
  }
  if (inserted) {
    ctx.log.info('iap_recorded', { provider, player_id: playerId });
    return false;
  }
  const existing = await ctx.db
    .selectFrom('iap_transactions')
    .select('player_id')
    .where('provider', '=', provider)
    .where('transaction_id', '=', transactionId)
    .executeTakeFirst();
  if (!existing) throw new ApiError('iap.record_failed', 'The receipt could not be recorded; try again.');
  if (existing.player_id === playerId) return true;
  throw new ApiError('iap.transaction_already_claimed', 'This transaction is already claimed by another account.');
}

import { missingField } from '../../runtime/contracts/errors';
import { claimAppleReceipt, claimGoogleReceipt } from '../../runtime/receipts/receipts';
import { AppleReceipt, AppleReceiptResult, GoogleReceipt, GoogleReceiptResult } from '../../runtime/schemas/iap';
import { route, type Route } from '../contract';

/** Store receipts: verified, recorded once per transaction, never granted here. */
export const iapRoutes: Route[] = [
  route({
    method: 'POST',
    path: '/api/v1/iap/apple',
    summary: 'Verify a StoreKit 2 signed transaction and record it for the caller',
    tag: 'economy',
    auth: 'player',
    rate: 'iap',
    body: AppleReceipt,
    response: AppleReceiptResult,
    errors: ['iap.verification_failed', 'iap.missing_transaction_id', 'iap.transaction_already_claimed', 'iap.record_failed'],
    handle: ({ ctx, player, body }) => claimAppleReceipt(ctx, player.playerId, body),
  }),
  route({
    method: 'POST',
    path: '/api/v1/iap/google',
    summary: "Verify a purchase with the store's publisher API and record it for the caller",
    tag: 'economy',
    auth: 'player',
    rate: 'iap',
    body: GoogleReceipt,
    // The reference answers a body that is not an object as a missing field, and absent fields as a store failure.
    notObject: () => missingField('product_id'),
    response: GoogleReceiptResult,
    errors: ['iap.verification_failed', 'iap.missing_transaction_id', 'iap.transaction_already_claimed', 'iap.record_failed'],
    handle: ({ ctx, player, body }) => claimGoogleReceipt(ctx, player.playerId, body),
  }),
];

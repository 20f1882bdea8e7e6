import { z } from 'zod';

/**
 * Store receipts over REST (`/iap/apple`, `/iap/google`). A field the store's
 * payload lacks is answered as the string `"undefined"`, as the clients of
 * this API family expect (they treat it as absent).
 */

const Absent = z.literal('undefined').meta({ description: 'the store payload lacks this field' });
/** A store string, or `"undefined"` when the store gave none. */
const StoreString = z.string().meta({ description: 'as the store gave it, or "undefined"' });

export const AppleReceipt = z.object({
  signed_transaction: z.string().meta({ description: 'the StoreKit 2 signed transaction (compact JWS)' }),
});
export type AppleReceipt = z.output<typeof AppleReceipt>;

export const AppleReceiptView = z.object({
  product_id: StoreString,
  transaction_id: z.string(),
  original_transaction_id: StoreString,
  purchase_date: z.union([z.number().int(), Absent]).meta({ description: 'epoch milliseconds' }),
  expires_date: z.union([z.number().int(), Absent]).meta({ description: 'epoch milliseconds' }),
  quantity: z.number().int(),
  type: z.string().meta({ description: "the store's transaction type; `unknown` when absent" }),
  valid: z.boolean().meta({ description: 'false only when expires_date lies in the past' }),
});
export type AppleReceiptView = z.output<typeof AppleReceiptView>;

export const AppleReceiptResult = AppleReceiptView.extend({
  duplicate: z.boolean().meta({ description: 'this player had submitted the transaction before' }),
});
export type AppleReceiptResult = z.output<typeof AppleReceiptResult>;

/**
 * Either field absent, empty or not a string is the store check's own
 * failure (422 `iap.verification_failed`, reason `missing_required_fields`),
 * not `missing_field`: the service sees it as absent.
 */
const Required = z.string().min(1).optional().catch(undefined);

export const GoogleReceipt = z.object({
  product_id: Required.meta({ description: 'the product (SKU) bought' }),
  purchase_token: Required.meta({ description: 'the purchase token the store gave the app' }),
});
export type GoogleReceipt = z.output<typeof GoogleReceipt>;

export const GoogleReceiptView = z.object({
  product_id: z.string(),
  order_id: z.string(),
  purchase_time: StoreString.meta({ description: "the store's purchaseTimeMillis, a string of epoch milliseconds" }),
  consumption_state: z.union([z.literal(0), z.literal(1), Absent]).meta({ description: '0 not consumed, 1 consumed' }),
  acknowledged: z.union([z.boolean(), Absent]),
  /** Purchases in any other state than purchased are refused, never answered invalid. */
  valid: z.literal(true),
});
export type GoogleReceiptView = z.output<typeof GoogleReceiptView>;

export const GoogleReceiptResult = GoogleReceiptView.extend({
  duplicate: z.boolean().meta({ description: 'this player had submitted the transaction before' }),
});
export type GoogleReceiptResult = z.output<typeof GoogleReceiptResult>;

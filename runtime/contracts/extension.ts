import type { Transaction } from 'kysely';
import type { Db } from '../platform/database';
import type { Logger } from '../platform/log';
import type { Capability } from './capabilities';
import type { Clock } from './context';
import type { ErrorCode } from './errors';
import type { Database } from './tables';

/**
 * What an extension module default-exports. Extensions are trusted code the
 * operator installs (setting `extensions`, a list of module paths); the host
 * checks each manifest at boot and refuses to start on a bad one, since a
 * half-installed extension would fail open (an erasure that skips its data,
 * an action nobody guards).
 *
 * Every seam an extension provides must be named in `seams`, and every named
 * seam provided: the list is what `/ops/features` reports, so it cannot be
 * allowed to drift from what actually runs.
 */
export interface Extension {
  /** 1-32 of `a-z 0-9 _`, starting with a letter: the RPC namespace, the `/ops/ext/<name>` segment and the domain of its error codes. */
  name: string;
  /** Free text of 1-64 printable characters, reported by `/ops/features`. */
  version: string;
  seams: ExtensionSeam[];
  /** `rpc.call` methods, served as `<name>.<method>` (socket and `POST /api/v1/rpc/<name>.<method>`). */
  rpc?: Record<string, ExtensionRpcMethod>;
  /** Operator actions under `/api/v1/ops/ext/<name>/<action>`. */
  actions?: Record<string, ExtensionAction>;
  /** The player's data for `GET /ops/players/:id/export`, under `extensions.<name>`. */
  export?: (playerId: string, on: ExtensionDataCall) => unknown;
  /**
   * Runs first inside every erasure's transaction (operator, self-erase,
   * guest purge and reaping). Throwing `ExtensionRefusal` (or anything)
   * aborts the whole erasure: the player survives intact. Work done outside
   * `on.trx` does not roll back with it, so keep it in the transaction or
   * make it safe to repeat.
   */
  erase?: (playerId: string, on: ExtensionDataCall) => void | Promise<void>;
  /** Called once at boot with what the host lends extensions. */
  setup?: (host: ExtensionHost) => void | Promise<void>;
  /** Operator screens the console lists in its navigation, each showing what one of this extension's `GET` actions returns. */
  console?: { screens: ExtensionScreen[] };
}

export interface ExtensionScreen {
  /** 1-64 of `A-Z a-z 0-9 _ -`: the screen's address under `/console/ext/<name>/`. */
  id: string;
  /** The navigation entry, 1-64 printable characters. */
  title: string;
  /** A `GET` action of this extension; the console calls it and shows the result. */
  action: string;
  /** Query parameters the console asks the operator for before calling the action. */
  fields?: string[];
}

export const EXTENSION_SEAMS = ['rpc', 'actions', 'export', 'erase', 'console'] as const;
export type ExtensionSeam = (typeof EXTENSION_SEAMS)[number];

export type ActionMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';
export const ACTION_METHODS: readonly ActionMethod[] = ['GET', 'POST', 'PUT', 'DELETE'];

export interface ExtensionAction {
  method: ActionMethod;
  /** The one capability class an operator credential needs, as on every ops route. */
  capability: Capability;
  /**
   * The codes this action may fail with, each `<extension>.<reason>` mapped
   * to its HTTP status (400-599). Any other failure answers 500 `internal`.
   */
  errors?: Record<string, number>;
  /**
   * `GET`: the query string as a map (first value of a repeated key); other
   * methods: the JSON body, an object. Returns the response body (an
   * object, sent without an envelope); throws `ExtensionError` to fail.
   */
  handle(input: Record<string, unknown>, call: ActionCall): unknown;
}

export interface ActionCall {
  /** Who called, as the audit trail names them. */
  operator: { id: string; display: string; source: string; attested: boolean };
}

export interface ExtensionRpcMethod {
  /** Core codes the method may fail with (an `ApiError` with any other answers `internal`). */
  codes?: ErrorCode[];
  /** Returns the result object (or nothing for `{}`); throws `ApiError` with a code in `codes` to fail. */
  handle(params: Record<string, unknown>, call: { playerId: string }): unknown;
}

export interface ExtensionDataCall {
  /** The export's read snapshot or the erasure's transaction. */
  trx: Transaction<Database>;
}

export interface ExtensionHost {
  db: Db;
  log: Logger;
  clock: Clock;
  /**
   * Pushes `module.event {module: <this extension's name>, event, data}` to
   * every socket of the player, on whichever node of the fleet holds them
   * (nothing when the player is offline; nothing is kept for later).
   * `event` is `<domain>.<name>`, at most 64 bytes, each part 1+ of
   * `A-Z a-z 0-9 _ -`; `data` a JSON object encoding under 64 KiB. Anything
   * else throws, as a defect of the extension (an RPC method answers
   * `internal`).
   */
  pushEvent(playerId: string, event: string, data: Record<string, unknown>): void;
}

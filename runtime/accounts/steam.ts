import type { Logger } from '../platform/log';
import { rejected, type OutboundFetch } from './oidc';

/**
 * The ticket provider `steam`: the client posts a
 * hex-encoded session ticket, which the provider's web API checks
 * (AuthenticateUserTicket); the display name comes from the player summary.
 */

/** Hex only, at most 4096 bytes; checked before any outbound call. */
const TICKET = /^[0-9a-fA-F]{1,4096}$/;

export interface TicketIdentity {
  uid: string;
  displayName: string | null;
  /** Provider flags refreshed on every sign-in (ban state). */
  metadata: Record<string, unknown>;
}

export interface SteamOptions {
  apiKey: string;
  appId: string;
  /** `steam_api_base`, e.g. `https://api.steampowered.com`. */
  base: string;
  fetch: OutboundFetch;
  log: Logger;
}

export class SteamVerifier {
  readonly #base: string;

  constructor(private readonly options: SteamOptions) {
    this.#base = options.base.replace(/\/+$/, '');
  }

  async verify(ticket: string): Promise<TicketIdentity> {
    if (!TICKET.test(ticket)) throw rejected('malformed_ticket');
    const auth = await this.#call('ISteamUserAuth/AuthenticateUserTicket/v1/', { appid: this.options.appId, ticket });
    const response = (auth as { response?: { params?: Record<string, unknown>; error?: unknown } }).response;
    if (response?.error !== undefined) throw rejected('ticket_refused');
    const params = response?.params;
    if (!params || typeof params !== 'object') throw rejected('malformed_reply');
    if (params.result !== 'OK') throw rejected('ticket_refused');
    if (typeof params.steamid !== 'string' || !/^\d{1,20}$/.test(params.steamid)) throw rejected('malformed_reply');
    return {
      uid: params.steamid,
      displayName: await this.#personaName(params.steamid),
      metadata: { vacbanned: params.vacbanned === true, publisherbanned: params.publisherbanned === true },
    };
  }

  /** The profile name, or null: a failed summary does not cost the player the sign-in. */
  async #personaName(steamId: string): Promise<string | null> {
    try {
      const body = await this.#call('ISteamUser/GetPlayerSummaries/v2/', { steamids: steamId });
      const players = (body as { response?: { players?: { personaname?: unknown }[] } }).response?.players;
      const name = Array.isArray(players) ? players[0]?.personaname : undefined;
      return typeof name === 'string' && name.trim() !== '' ? name : null;
    } catch (err) {
      this.options.log.warn('steam_summary_failed', { reason: err instanceof Error ? err.message : String(err) });
      return null;
    }
  }

  async #call(method: string, query: Record<string, string>): Promise<unknown> {
    const params = new URLSearchParams({ key: this.options.apiKey, ...query });
    let response: Response;
    try {
      response = await this.options.fetch(`${this.#base}/${method}?${params}`, { headers: { accept: 'application/json' } });
    } catch (err) {
      const timedOut = err instanceof Error && err.name === 'TimeoutError';
      // The URL carries the API key: log the method only.
      this.options.log.warn('steam_call_failed', { method, error: err instanceof Error ? err.message : String(err) });
      throw rejected(timedOut ? 'timeout' : 'provider_unreachable');
    }
    if (!response.ok) {
      this.options.log.warn('steam_call_failed', { method, status: response.status });
      throw rejected('provider_error');
    }
    try {
      return await response.json();
    } catch {
      throw rejected('malformed_reply');
    }
  }
}

// Entry of dist/client.mjs: a typed client of the service for game clients,
// in browsers and in Node. See docs/client.md.
import type { paths } from './generated/openapi';
import { RestClient, type RestOptions, type Tokens } from './rest';
import { GameSocket, type SocketOptions } from './socket';

export { RestClient, type CallInit, type Method, type PathsWith, type RawInit, type RestOptions, type Success, type Tokens } from './rest';
export {
  GameSocket,
  type Frame,
  type ListenerPayload,
  type ListenerType,
  type PayloadOf,
  type ReplyOf,
  type RequestType,
  type SilentType,
  type SocketOptions,
  type SocketStatus,
  type StatusChange,
  type WebSocketFactory,
  type WebSocketLike,
} from './socket';
export { ConnectionError, ServiceError, type ErrorBody, type ErrorCode } from './service-error';
export type { components, operations, paths } from './generated/openapi';
export type { ClientFrames, OpenPushType, PushFrames, ReplyFrames } from './generated/frames';

type Body<P extends keyof paths> = paths[P] extends { post: { requestBody?: { content: { 'application/json': infer B } } } } ? B : never;
type Answer<P extends keyof paths> = paths[P] extends { post: { responses: { 200: { content: { 'application/json': infer R } } } } } ? R : never;

export interface ClientOptions extends RestOptions {
  /** The WebSocket implementation for sessions (default: the global one). */
  WebSocket?: SocketOptions['WebSocket'];
}

/** A signed-in (or not yet) player: REST with token upkeep, and WebSocket sessions on the same tokens. */
export class GameClient {
  readonly rest: RestClient;
  readonly #options: ClientOptions;
  #playerId: string | null = null;
  readonly #sockets = new Set<GameSocket>();

  constructor(options: ClientOptions) {
    this.#options = options;
    this.rest = new RestClient(options);
  }

  /** The signed-in player, once a sign-in answered (or a socket connected). */
  get playerId(): string | null {
    return this.#playerId;
  }

  get signedIn(): boolean {
    return this.rest.tokens !== null;
  }

  register(body: Body<'/api/v1/auth/register'>): Promise<Answer<'/api/v1/auth/register'>> {
    return this.#signIn(this.rest.post('/api/v1/auth/register', { body }));
  }

  login(body: Body<'/api/v1/auth/login'>): Promise<Answer<'/api/v1/auth/login'>> {
    return this.#signIn(this.rest.post('/api/v1/auth/login', { body }));
  }

  /** A guest on this device: `device_id` stable per install, `device_secret` base64 of 32+ random bytes kept with it. */
  guest(body: Body<'/api/v1/auth/guest'>): Promise<Answer<'/api/v1/auth/guest'>> {
    return this.#signIn(this.rest.post('/api/v1/auth/guest', { body }));
  }

  /** Turns the signed-in guest into a password account (same player; the service issues a new token pair). */
  upgradeGuest(body: Body<'/api/v1/auth/guest/upgrade'>): Promise<Answer<'/api/v1/auth/guest/upgrade'>> {
    return this.#signIn(this.rest.post('/api/v1/auth/guest/upgrade', { body }));
  }

  /** Ends the session: the service revokes the token family, sockets close, tokens are forgotten. */
  async logout(): Promise<void> {
    const tokens = this.rest.tokens;
    for (const socket of this.#sockets) socket.close();
    this.#sockets.clear();
    // Forgotten before the service answers, so a page closed meanwhile does not keep a session it ended.
    this.rest.setTokens(null);
    this.#playerId = null;
    if (!tokens) return;
    await this.rest.post('/api/v1/auth/logout', { body: { refresh_token: tokens.refresh_token }, headers: { authorization: `Bearer ${tokens.access_token}` } });
  }

  /** A WebSocket session on this client's tokens (refreshed through REST when the service refuses one). */
  socket(options: Omit<SocketOptions, 'baseUrl' | 'token' | 'refresh'> = {}): GameSocket {
    const socket = new GameSocket({
      ...(this.#options.WebSocket ? { WebSocket: this.#options.WebSocket } : {}),
      ...options,
      baseUrl: this.rest.baseUrl,
      token: () => this.rest.tokens?.access_token ?? null,
      refresh: () => this.rest.refresh(),
    });
    socket.onStatus((change) => {
      if (change.status === 'connected' && socket.playerId) this.#playerId = socket.playerId;
      if (change.status === 'closed') this.#sockets.delete(socket);
    });
    this.#sockets.add(socket);
    return socket;
  }

  async #signIn<A extends Tokens & { player_id: string }>(answer: Promise<A>): Promise<A> {
    const signedIn = await answer;
    this.rest.setTokens(signedIn);
    this.#playerId = signedIn.player_id;
    return signedIn;
  }
}

/** A client of the service at `baseUrl`. */
export function createClient(options: ClientOptions): GameClient {
  return new GameClient(options);
}

/**
 * The socket's frame table: every client frame contract with the handler
 * that serves it, declared once, as handlers/routes.ts declares the REST
 * routes. The services expose their handlers; this table decides which
 * frame reaches which, and the gateway serves exactly what it lists. A test
 * (test/api-documents.test.ts) holds the table to the declared client
 * frames (runtime/schemas/wire.ts): each listed once, none missing.
 */
import type { ClientFrameContract } from '../../runtime/schemas/frame-contract';
import { sessionConnect, sessionHeartbeat } from '../../runtime/schemas/session';
import { presenceUpdate } from '../../runtime/schemas/presence';
import { chatJoin, chatLeave, chatSend } from '../../runtime/schemas/chat';
import { dmSend } from '../../runtime/schemas/dm';
import { matchmakerAdd, matchmakerRemove } from '../../runtime/schemas/matchmaker';
import { matchFindOrCreate, matchInput, matchJoin, matchLeave, matchList } from '../../runtime/schemas/matches';
import { worldCreate, worldFindOrCreate, worldInput, worldJoin, worldLeave, worldList, worldResync } from '../../runtime/schemas/worlds';
import { rpcCall } from '../../runtime/schemas/rpc';
import { voteCast, voteVeto } from '../../runtime/schemas/votes';
import type { FrameHandler, FrameRoute, Gateway } from './gateway';
import type { PresenceHost } from './presence-host';
import type { ChatHost } from './chat';
import type { Matchmaker } from './matchmaker';
import type { MatchHost } from './match/match-host';
import type { WorldHost } from './world/world-host';
import type { RpcRegistry } from './rpc';
import type { MatchVotes } from './votes';

/** The services whose handlers the table names. */
export interface FrameServices {
  session: Pick<Gateway, 'connectFrame' | 'heartbeatFrame'>;
  presence: PresenceHost;
  chat: ChatHost;
  matchmaker: Matchmaker;
  matches: MatchHost;
  worlds: WorldHost;
  rpc: RpcRegistry;
  votes: MatchVotes;
}

/** A row; the handler is checked against its contract's payload here, where the two meet. */
function frame<C extends ClientFrameContract>(contract: C, handle: FrameHandler<C>): FrameRoute {
  return { contract, handle: handle as FrameHandler<ClientFrameContract> };
}

export function frameTable(s: FrameServices): FrameRoute[] {
  return [
    frame(sessionConnect, s.session.connectFrame),
    frame(sessionHeartbeat, s.session.heartbeatFrame),
    frame(presenceUpdate, s.presence.updateFrame),
    frame(chatJoin, s.chat.joinFrame),
    frame(chatLeave, s.chat.leaveFrame),
    frame(chatSend, s.chat.sendFrame),
    frame(dmSend, s.chat.dmFrame),
    frame(matchmakerAdd, s.matchmaker.addFrame),
    frame(matchmakerRemove, s.matchmaker.removeFrame),
    frame(matchList, s.matches.listFrame),
    frame(matchJoin, s.matches.joinFrame),
    frame(matchFindOrCreate, s.matches.findOrCreateFrame),
    frame(matchLeave, s.matches.leaveFrame),
    frame(matchInput, s.matches.inputFrame),
    frame(worldList, s.worlds.listFrame),
    frame(worldCreate, s.worlds.createFrame),
    frame(worldFindOrCreate, s.worlds.findOrCreateFrame),
    frame(worldJoin, s.worlds.joinFrame),
    frame(worldLeave, s.worlds.leaveFrame),
    frame(worldInput, s.worlds.inputFrame),
    frame(worldResync, s.worlds.resyncFrame),
    frame(rpcCall, s.rpc.callFrame),
    frame(voteCast, s.votes.castFrame),
    frame(voteVeto, s.votes.vetoFrame),
  ];
}

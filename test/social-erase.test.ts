import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { ws_connect: { limit: 1000, window: 1000 } }, game_modes: { m: { chat_channels: ['lobby'] } } });
});
afterAll(async () => {
  await s.close();
});

/** Erasing a player removes their social rows and severs what others keep (groups stay, their creator reference nulled). */
describe('erasure of social data', () => {
  it('deletes friendships, memberships, requests, chat, DMs both ways and notifications; keeps groups with creator nulled', async () => {
    const [victim, friend, other] = [await registerPlayer(s), await registerPlayer(s), await registerPlayer(s)];
    const as = (p: typeof victim) => ({ token: p.access_token });
    // Friendships both directions and a block.
    await s.call('POST', '/api/v1/friends', { ...as(victim), body: { friend_id: friend.player_id } });
    await s.call('PUT', `/api/v1/friends/${victim.player_id}`, { ...as(friend), body: { status: 'accepted' } });
    await s.call('POST', '/api/v1/friends', { ...as(friend), body: { friend_id: other.player_id } });
    // A group the victim created and owns, one it joined, a request and an invitation it sent.
    const mine = (await s.call('POST', '/api/v1/groups', { ...as(victim), body: { name: 'Victim club', open: true } })).body.id;
    await s.call('POST', `/api/v1/groups/${mine}/join`, as(friend));
    const theirs = (await s.call('POST', '/api/v1/groups', { ...as(friend), body: { name: 'Friend club' } })).body.id;
    await s.call('POST', `/api/v1/groups/${theirs}/join`, as(victim));
    await s.call('POST', `/api/v1/groups/${mine}/invites`, { ...as(victim), body: { player_id: other.player_id } });
    await s.call('POST', `/api/v1/groups/${theirs}/invites`, { ...as(friend), body: { player_id: other.player_id } });
    // Blocked after the invitation went out: a blocked pair cannot invite each other.
    await s.call('PUT', `/api/v1/friends/${victim.player_id}`, { ...as(other), body: { status: 'blocked' } });
    // Chat and DMs both ways.
    const sock = await TestSocket.open(s);
    await sock.request('session.connect', { token: victim.access_token });
    sock.send({ type: 'chat.send', payload: { channel_id: 'global:lobby', content: 'hello all' } });
    await s.call('POST', '/api/v1/dm', { ...as(victim), body: { recipient_id: friend.player_id, content: 'to friend' } });
    await s.call('POST', '/api/v1/dm', { ...as(friend), body: { recipient_id: victim.player_id, content: 'to victim' } });
    await s.call('POST', '/api/v1/dm', { ...as(friend), body: { recipient_id: other.player_id, content: 'unrelated' } });
    await sock.request('session.heartbeat');
    sock.close();

    const db = s.ctx.db;
    const count = async (table: 'friendships' | 'group_members' | 'group_requests' | 'chat_messages' | 'notifications', where: (q: any) => any) =>
      Number((await where(db.selectFrom(table).select(db.fn.countAll<number>().as('n'))).executeTakeFirstOrThrow()).n);
    const v = victim.player_id;
    expect(await count('chat_messages', (q) => q.where('sender_id', '=', v))).toBe(2);
    expect(await count('notifications', (q) => q.where('player_id', '=', v))).toBeGreaterThan(0);

    const res = await s.call('POST', '/api/v1/players/me/erase', { ...as(victim), body: { password: victim.password } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);

    expect(await count('friendships', (q) => q.where((eb: any) => eb.or([eb('player_id', '=', v), eb('friend_id', '=', v)])))).toBe(0);
    expect(await count('group_members', (q) => q.where('player_id', '=', v))).toBe(0);
    expect(await count('group_requests', (q) => q.where((eb: any) => eb.or([eb('player_id', '=', v), eb('invited_by', '=', v)])))).toBe(0);
    expect(await count('chat_messages', (q) => q.where((eb: any) => eb.or([eb('sender_id', '=', v), eb('recipient_id', '=', v)])))).toBe(0);
    expect(await count('notifications', (q) => q.where('player_id', '=', v))).toBe(0);

    // What others hold stays: the group with its creator severed, the invitation (inviter nulled), the unrelated rows.
    const group = await s.call('GET', `/api/v1/groups/${mine}`, as(friend));
    expect(group.body).toMatchObject({ id: mine, creator_id: null, name: 'Victim club' });
    expect((await s.call('GET', `/api/v1/groups/${mine}/members`, as(friend))).body.members.map((m: any) => m.player_id)).toEqual([friend.player_id]);
    const invite = await db.selectFrom('group_requests').selectAll().where('group_id', '=', mine).executeTakeFirstOrThrow();
    expect(invite).toMatchObject({ player_id: other.player_id, invited_by: null, kind: 'invite' });
    expect(await count('group_requests', (q) => q.where('group_id', '=', theirs))).toBe(1);
    expect(await count('friendships', (q) => q.where('player_id', '=', friend.player_id))).toBe(1);
    expect(await count('chat_messages', (q) => q.where('recipient_id', '=', other.player_id))).toBe(1);
    expect((await s.call('GET', `/api/v1/dm/${v}/history`, as(friend))).body.messages).toEqual([]);
  });
});

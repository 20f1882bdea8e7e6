import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, registerPlayer, type TestPlayer } from './support/accounts';
import { expectOpsDenied, OPS_SECRET, opsGet, opsPost, opsToken } from './support/ops';
import { startTestServer, type TestServer } from './support/server';
import { TestSocket } from './support/ws-client';

/** `POST /ops/players/:id/erase`: the username echo, the one erasure, its audit row in the same transaction. */

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ ops_secret: OPS_SECRET, leaderboard_client_submit: ['ops_erase'], rate_limits: { ws_connect: { limit: 1000, window: 1000 } } });
});
afterAll(async () => {
  await s.close();
});

const erase = (id: string, body?: unknown, bearer: string = OPS_SECRET, headers: Record<string, string> = {}) => opsPost(s, `/players/${id}/erase`, body, bearer, headers);
const exists = async (id: string) => (await s.ctx.db.selectFrom('players').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
const profile = (p: TestPlayer, token = p.access_token) => s.call('GET', `/api/v1/players/${p.player_id}`, { token });
const auditOf = (id: string) => s.ctx.db.selectFrom('ops_audit_entries').selectAll().where('target_id', '=', id).execute();

describe('POST /ops/players/:id/erase', () => {
  it('answers 400 ops.confirmation_required without a username echo, and deletes nothing', async () => {
    const p = await registerPlayer(s);
    for (const body of [undefined, {}, { username: null }, { username: 42 }, { name: p.username }]) {
      expectError(await erase(p.player_id, body), 400, 'ops.confirmation_required');
    }
    expect(await exists(p.player_id)).toBe(true);
    expect((await profile(p)).status).toBe(200);
    expect(await auditOf(p.player_id)).toHaveLength(0);
  });

  it('answers 400 ops.confirmation_mismatch for another name, and deletes nothing', async () => {
    const p = await registerPlayer(s);
    const other = await registerPlayer(s);
    for (const username of [other.username, p.username.toUpperCase(), `${p.username} `, '']) {
      expectError(await erase(p.player_id, { username }), 400, 'ops.confirmation_mismatch');
    }
    expect(await exists(p.player_id)).toBe(true);
    expect((await profile(p)).status).toBe(200);
    expect(await auditOf(p.player_id)).toHaveLength(0);
  });

  it('erases the player whose username is echoed; its tokens, sockets and live board entries go at once', async () => {
    const p = await registerPlayer(s);
    const bystander = await registerPlayer(s);
    expect((await s.call('POST', '/api/v1/leaderboards/ops_erase', { token: p.access_token, body: { score: 5 } })).status).toBe(200);
    expect((await s.call('POST', '/api/v1/leaderboards/ops_erase', { token: bystander.access_token, body: { score: 3 } })).status).toBe(200);
    const socket = await TestSocket.open(s);
    expect((await socket.request('session.connect', { token: p.access_token })).type).toBe('session.connected');
    expect((await profile(bystander, p.access_token)).status).toBe(200);

    const res = await erase(p.player_id, { username: p.username });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ data: { player_id: p.player_id, erased: true } });

    expect(await exists(p.player_id)).toBe(false);
    await socket.closed;
    expectError(await profile(bystander, p.access_token), 401, 'unauthenticated');
    expectError(await s.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } }), 401, 'unauthenticated');
    const board = await s.call('GET', '/api/v1/leaderboards/ops_erase', { token: bystander.access_token });
    expect(board.body.entries.map((e: { player_id: string }) => e.player_id)).toEqual([bystander.player_id]);
    expect((await profile(bystander)).status).toBe(200);
    // Done once: the id names nobody now.
    expectError(await erase(p.player_id, { username: p.username }), 404, 'ops.not_found');
  });

  it('writes one audit row naming the operator, as the header gives them behind the secret', async () => {
    const p = await registerPlayer(s);
    expect((await erase(p.player_id, { username: p.username }, OPS_SECRET, { 'x-svc-operator': 'alice' })).status).toBe(200);
    const rows = await auditOf(p.player_id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      actor_id: 'ops_secret',
      actor_display: 'alice',
      actor_source: 'ops_secret',
      actor_attested: false,
      action: 'player.erase',
      target_type: 'player',
      target_id: p.player_id,
      outcome: 'ok',
      succeeded_count: 1,
      failed_count: 0,
    });
    expect(rows[0]!.details).toMatchObject({ via: 'ops', rows: { players: 1 } });
    // The trail outlives the player; it keeps neither the name nor a credential.
    const text = JSON.stringify(rows[0]);
    for (const leaked of [p.username, p.password, OPS_SECRET]) expect(text).not.toContain(leaked);
    // And the audit list shows it.
    const listed = await opsGet(s, `/audit?target_id=${p.player_id}`);
    expect(listed.body.data).toEqual([expect.objectContaining({ action: 'player.erase', actor_display: 'alice' })]);
  });

  it('records a minted token’s signed name as attested', async () => {
    const p = await registerPlayer(s);
    const token = await opsToken(['erasure'], { name: 'bob' });
    expect((await erase(p.player_id, { username: p.username }, token, { 'x-svc-operator': 'mallory' })).status).toBe(200);
    const [row] = await auditOf(p.player_id);
    expect(row).toMatchObject({ actor_display: 'bob', actor_source: 'ops_token', actor_attested: true });
    expect(row!.actor_id).toMatch(/^ops_token:[0-9a-f-]{36}$/);
  });

  it('rolls the erasure back when its audit row cannot be written', async () => {
    const p = await registerPlayer(s);
    // The fault: the audit table refuses this one row.
    await sql`create or replace function refuse_audit() returns trigger language plpgsql as $$
      begin raise exception 'audit refused'; end $$`.execute(s.ctx.db);
    await sql`create trigger refuse_audit before insert on ops_audit_entries for each row when (new.target_id = ${sql.lit(p.player_id)}) execute function refuse_audit()`.execute(s.ctx.db);
    let res;
    try {
      res = await erase(p.player_id, { username: p.username });
    } finally {
      await sql`drop trigger refuse_audit on ops_audit_entries`.execute(s.ctx.db);
    }
    expectError(res, 500, 'player.erase_failed');
    expect(await exists(p.player_id)).toBe(true);
    expect((await profile(p)).status).toBe(200);
    expect(await s.ctx.db.selectFrom('player_tokens').select('id').where('user_id', '=', p.player_id).execute()).not.toHaveLength(0);
    expect(s.logs.some((l) => l.event === 'player_erase_failed' && l.player_id === p.player_id && l.via === 'ops')).toBe(true);
    // Nothing stuck: the same erasure goes through once the audit row can be written.
    expect((await erase(p.player_id, { username: p.username })).status).toBe(200);
    expect(await exists(p.player_id)).toBe(false);
  });

  it('answers 400 ops.invalid_id for a non-UUID and 404 ops.not_found for nobody', async () => {
    expectError(await erase('nobody', { username: 'x' }), 400, 'ops.invalid_id');
    expectError(await erase(randomUUID(), { username: 'x' }), 404, 'ops.not_found');
  });

  it('takes the erasure class and refuses every other, and player tokens', async () => {
    const p = await registerPlayer(s);
    for (const cap of ['read', 'player_data', 'config'] as const) expectOpsDenied(await erase(p.player_id, { username: p.username }, await opsToken([cap])));
    expectOpsDenied(await erase(p.player_id, { username: p.username }, p.access_token));
    expect(await exists(p.player_id)).toBe(true);
    expect((await erase(p.player_id, { username: p.username }, await opsToken(['erasure']))).status).toBe(200);
  });
});

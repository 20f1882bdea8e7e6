import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer } from './support/ws-client';

/**
 * `response_checks` over every frame a socket sends, pushes included: a push
 * whose payload fails the schema the AsyncAPI document publishes for its type
 * is held back and logged, and the test support fails the server's owner at
 * teardown. With the setting off (production) the frame goes out as it is.
 */

const note = (playerId: string) => ({ id: '01a22256-8a6d-7000-bce8-214233d5de27', player_id: playerId, type: 'test', subject: 'hello', content: {}, read: false, sent_at: '2026-01-01T00:00:00Z' });

describe('response checks over pushes', () => {
  it('holds back a push that fails its published schema, logs it, and fails the server at teardown', async () => {
    const s = await startTestServer();
    const { socket, playerId } = await connectPlayer(s);
    // `mode` where the published match.matched has none, and a notification without its fields.
    s.ctx.live.push(playerId, { type: 'match.matched', payload: { match_id: '01a22256-8a6d-7000-bce8-214233d5de27', players: [playerId], mode: 'arena' } });
    s.ctx.live.push(playerId, { type: 'notification.new', payload: { n: 1 } });
    s.ctx.live.push(playerId, { type: 'made.up', payload: {} });
    // A sound push after them still goes out, so the ones before were held back, not late.
    s.ctx.live.push(playerId, { type: 'notification.new', payload: note(playerId) });
    const first = await socket.next();
    expect(first).toEqual({ type: 'notification.new', payload: note(playerId) });
    expect(socket.frames).toEqual([]);
    const failed = s.logs.filter((l) => l.event === 'frame_check_failed');
    expect(failed.map((l) => [l.level, l.frame_type])).toEqual([
      ['error', 'match.matched'],
      ['error', 'notification.new'],
      ['error', 'made.up'],
    ]);
    expect(String(failed[0]!.problem)).toContain('mode');
    expect(String(failed[2]!.problem)).toBe('undeclared frame type');
    socket.close();
    await expect(s.close()).rejects.toThrow(/frames that fail their published schema: match\.matched/);
  });

  it('checks replies and script-named broadcasts by their type, and lets sound frames through', async () => {
    const s = await startTestServer();
    const { socket, playerId } = await connectPlayer(s);
    s.ctx.live.push(playerId, { type: 'match.score', payload: { a: 1 } });
    expect(await socket.next('match.score')).toEqual({ type: 'match.score', payload: { a: 1 } });
    expect((await socket.request('session.heartbeat')).type).toBe('session.heartbeat');
    socket.close();
    await s.close();
    expect(s.logs.filter((l) => l.event === 'frame_check_failed')).toEqual([]);
  });

  it('is off in production: with response_checks false the push goes out as it is', async () => {
    const s = await startTestServer({ response_checks: false });
    const { socket, playerId } = await connectPlayer(s);
    s.ctx.live.push(playerId, { type: 'notification.new', payload: { n: 1 } });
    expect(await socket.next('notification.new')).toEqual({ type: 'notification.new', payload: { n: 1 } });
    socket.close();
    await s.close();
  });
});

describe('the frames a real session sees pass their schemas', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.close();
  });

  it('an unknown frame is answered with an error frame that passes its published schema', async () => {
    const { socket } = await connectPlayer(s);
    socket.send({ type: 'no.such', cid: 'c1', payload: {} });
    const err = await socket.next('error');
    expect(err.payload.reason).toBe('unknown_type');
    socket.close();
    expect(s.logs.filter((l) => l.event === 'frame_check_failed')).toEqual([]);
  });
});

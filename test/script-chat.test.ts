import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gameDir } from './support/game-dir';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type Frame } from './support/ws-client';

/**
 * `game.chat.send(channel_id, sender_id, content)` (the sender need not be a member):
 * a script's message is stored, reaches the channel's members as
 * `chat.message`, shows in the history, and is held to the per-channel
 * `script_chat` limit.
 */

const game = gameDir({
  'match.lua': `
match_size = 1
quick_play = true
function init(config) return { answers = {}, tick = 0 } end
function join(player_id, state) return state end
function leave(player_id, state) return state end
function handle_input(player_id, input, state)
  local function answer(v) state.answers[#state.answers + 1] = type(v) == "table" and ("error: " .. tostring(v.error)) or tostring(v) end
  if input.say then
    for i = 1, input.times or 1 do answer(game.chat.send(input.channel, input.sender or player_id, input.say .. (input.times and (" " .. i) or ""))) end
  end
  if input.misuse then
    answer(game.chat.send())
    answer(game.chat.send(input.channel, player_id, 42))
    answer(game.chat.send("lobby", player_id, "hi"))
    answer(game.chat.send(input.channel, "bot_spark_abc123", "hi"))
    answer(game.chat.send(input.channel, player_id, ""))
  end
  return state
end
function tick(state) state.tick = state.tick + 1 return state end
function get_state(player_id, state) return { answers = state.answers, tick = state.tick } end
`,
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ rate_limits: { script_chat: { limit: 3, window: 60_000 } } }, { gameDir: game.dir });
});
afterAll(async () => {
  await s.close();
  game.remove();
});

type Player = Awaited<ReturnType<typeof connectPlayer>>;

/** A group of these players; its room channel, joined by every one of them. */
async function room(owner: Player, ...others: Player[]): Promise<string> {
  const g = await s.call('POST', '/api/v1/groups', { token: owner.token, body: { name: `Room ${Math.random().toString(36).slice(2, 8)}`, open: true } });
  expect(g.status).toBe(200);
  for (const p of others) expect((await s.call('POST', `/api/v1/groups/${g.body.id}/join`, { token: p.token })).status).toBe(200);
  const channel = `room:${g.body.id}`;
  for (const p of [owner, ...others]) expect((await p.socket.request('chat.join', { channel_id: channel })).type).toBe('chat.joined');
  return channel;
}

const answersAtLeast = (n: number) => (f: Frame) => f.type === 'match.state' && f.payload.answers.length >= n;
const history = (p: Player, channel: string) => s.call('GET', `/api/v1/chat/${encodeURIComponent(channel)}/history`, { token: p.token });

describe('game.chat.send', () => {
  it('reaches a joined member as chat.message and lands in the history', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const channel = await room(a, b);
    expect((await a.socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');

    a.socket.send({ type: 'match.input', payload: { say: 'gg from the script', channel } });
    const st = await a.socket.next(answersAtLeast(1), 10_000);
    expect(st.payload.answers).toEqual(['true']);
    // b is in the room, not in the match: the message came through chat.
    const got = await b.socket.next('chat.message', 10_000);
    expect(got.payload).toMatchObject({ channel_id: channel, sender_id: a.playerId, content: 'gg from the script' });
    expect(typeof got.payload.sent_at).toBe('number');

    const h = await history(b, channel);
    expect(h.status).toBe(200);
    expect(h.body.messages.map((m: any) => [m.sender_id, m.content])).toEqual([[a.playerId, 'gg from the script']]);
    a.socket.close();
    b.socket.close();
  });

  it('answers usage errors for wrong arguments and sends nothing', async () => {
    const a = await connectPlayer(s);
    const channel = await room(a);
    expect((await a.socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
    a.socket.send({ type: 'match.input', payload: { misuse: true, channel } });
    const st = await a.socket.next(answersAtLeast(5), 10_000);
    expect(st.payload.answers).toHaveLength(5);
    for (const answer of st.payload.answers) expect(answer).toMatch(/^error: game\.chat\.send\(channel_id, sender_id, content\)/);
    expect(await a.socket.quiet('chat.message', 300)).toBe(true);
    expect((await history(a, channel)).body.messages).toEqual([]);
    a.socket.close();
  });

  it('holds scripts to the per-channel script_chat limit and keeps the order of what it sent', async () => {
    const a = await connectPlayer(s);
    const channel = await room(a);
    expect((await a.socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
    a.socket.send({ type: 'match.input', payload: { say: 'burst', times: 5, channel } });
    const st = await a.socket.next(answersAtLeast(5), 10_000);
    expect(st.payload.answers).toEqual(['true', 'true', 'true', 'false', 'false']);
    const received: string[] = [];
    for (let i = 0; i < 3; i++) received.push((await a.socket.next('chat.message', 10_000)).payload.content);
    expect(received).toEqual(['burst 1', 'burst 2', 'burst 3']);
    expect((await history(a, channel)).body.messages.map((m: any) => m.content)).toEqual(['burst 1', 'burst 2', 'burst 3']);
    expect(s.logs.filter((l) => l.event === 'script_chat_dropped' && l.channel_id === channel && l.reason === 'rate_limited')).toHaveLength(2);
    a.socket.close();
  });

  it('is stored by the chat host’s writer: a message the database refuses fails as a player’s would, reaching nobody', async () => {
    const a = await connectPlayer(s);
    const b = await connectPlayer(s);
    const channel = await room(a, b);
    expect((await a.socket.request('match.find_or_create', { mode: 'default' })).type).toBe('match.joined');
    // A sender that is no player: the row's reference refuses it.
    const nobody = '00000000-0000-4000-8000-00000000dead';
    a.socket.send({ type: 'match.input', payload: { say: 'from nobody', channel, sender: nobody } });
    expect((await a.socket.next(answersAtLeast(1), 10_000)).payload.answers).toEqual(['true']);
    const dropped = () => s.logs.find((l) => l.event === 'script_chat_dropped' && l.channel_id === channel && l.reason === 'not_stored');
    await expect.poll(dropped, { timeout: 10_000 }).toBeDefined();
    // The same failure a player's refused message reports: the script's message went through the chat host's group commit.
    expect(s.logs.some((l) => l.event === 'chat_persist_failed' && l.level === 'error')).toBe(true);
    expect(await b.socket.quiet('chat.message', 300)).toBe(true);
    expect((await history(b, channel)).body.messages).toEqual([]);
    // A refused sender is refused at once for a while: its next message never reaches the writer.
    const persistFailures = () => s.logs.filter((l) => l.event === 'chat_persist_failed').length;
    const failuresBefore = persistFailures();
    a.socket.send({ type: 'match.input', payload: { say: 'again from nobody', channel, sender: nobody } });
    expect((await a.socket.next(answersAtLeast(2), 10_000)).payload.answers).toEqual(['true', 'false']);
    expect(s.logs.some((l) => l.event === 'script_chat_dropped' && l.channel_id === channel && l.reason === 'unknown_sender')).toBe(true);
    expect(persistFailures()).toBe(failuresBefore);
    a.socket.close();
    b.socket.close();
  });
});

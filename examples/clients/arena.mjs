// A small game client for the demo game's `arena` mode, written against the
// public API only: sign in over REST, open the WebSocket, queue with the
// matchmaker, then walk towards the coin until the match is over.
//
//   node examples/clients/arena.mjs <username> <password>
//
// SVC_URL points it at another server (default http://localhost:8084).
// Exits 0 when the match finishes, 1 on any error.
import WebSocket from 'ws';

const [username, password] = process.argv.slice(2);
if (!username || !password) {
  console.error('usage: node examples/clients/arena.mjs <username> <password>');
  process.exit(2);
}
const base = process.env.SVC_URL ?? 'http://localhost:8084';

// 1. Sign in: the access token opens the WebSocket session.
const login = await fetch(`${base}/api/v1/auth/login`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ username, password }),
});
const signIn = await login.json();
if (login.status !== 200) fail(`login: ${login.status} ${signIn.error?.code}: ${signIn.error?.message}`);
const me = signIn.player_id;
console.log(`${username}: signed in as ${me}`);

// 2. Every frame is {type, cid?, payload}; a cid pairs a request with its reply.
const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/ws`);
let nextCid = 0;
const pending = new Map();
function request(type, payload) {
  const cid = `c${++nextCid}`;
  ws.send(JSON.stringify({ type, cid, payload }));
  return new Promise((resolve, reject) => pending.set(cid, { resolve, reject }));
}

let position = null;
let coin = null;
let score = 0;
let lastMove = 0;

ws.on('message', (data) => {
  const frame = JSON.parse(String(data));
  if (frame.cid && pending.has(frame.cid)) {
    const { resolve, reject } = pending.get(frame.cid);
    pending.delete(frame.cid);
    if (frame.type === 'error') reject(new Error(`${frame.payload.error.code}: ${frame.payload.error.message}`));
    else resolve(frame);
    return;
  }
  switch (frame.type) {
    case 'match.matched':
      console.log(`${username}: matched into ${frame.payload.match_id}`);
      break;
    case 'match.state': {
      // Our own view, every tick (100 ms): where we are, where the coin is.
      const self = frame.payload.players[me];
      if (!self) break;
      position = self;
      coin = frame.payload.coin;
      if (self.score !== score) {
        score = self.score;
        console.log(`${username}: score ${score}`);
      }
      walk();
      break;
    }
    case 'match.finished': {
      const r = frame.payload.result;
      const outcome = r.draw ? 'a draw' : r.winner === me ? 'won' : 'lost';
      console.log(`${username}: match finished, ${outcome} (${r.reason}), final score ${score}`);
      ws.close(1000);
      break;
    }
    case 'error':
      console.error(`${username}: ${frame.payload.error.code}: ${frame.payload.error.message}`);
      break;
  }
});

// One step towards the coin at most every 150 ms, well under the frame limits.
function walk() {
  const now = Date.now();
  if (!position || !coin || now - lastMove < 150) return;
  const dx = Math.sign(coin.x - position.x);
  const dy = dx === 0 ? Math.sign(coin.y - position.y) : 0;
  if (dx === 0 && dy === 0) return;
  lastMove = now;
  ws.send(JSON.stringify({ type: 'match.input', payload: { dx, dy } }));
}

ws.on('open', async () => {
  try {
    await request('session.connect', { token: signIn.access_token });
    // 3. Queue for the arena; the matchmaker pairs two players and starts the match.
    const queued = await request('matchmaker.add', { mode: 'arena', properties: {} });
    console.log(`${username}: queued (ticket ${queued.payload.ticket_id}), waiting for an opponent`);
  } catch (err) {
    fail(err.message);
  }
});
ws.on('close', (code) => process.exit(code === 1000 ? 0 : 1));
ws.on('error', (err) => fail(err.message));

function fail(message) {
  console.error(`${username}: ${message}`);
  process.exit(1);
}

// The /play page: the demo game's `arena` mode in a browser, through the
// typed client (client/). Sign in, queue, play on a canvas, chat, see the result.
import { ConnectionError, createClient, ServiceError, type GameSocket, type PushFrames } from '../client';
import './page.css';
import { ArenaBoard, arenaView, type ArenaView } from './arena-board';
import { ChatLog } from './chat-log';
import { guestDevice, savedTokens, saveTokens } from './credentials';

const MODE = 'arena';
/** How often auto-walk looks at the board; it steps at most once per match tick (100 ms). */
const WALK_MS = 40;
/** `/play?wire=binary` asks for the binary `world.tick` wire; the arena is a match and sends none, a world mode would. */
const WIRE = new URLSearchParams(location.search).get('wire') === 'binary' ? 'binary' : 'json';

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} missing from index.html`);
  return found as T;
}

const ui = {
  connection: element('connection'),
  who: element('who'),
  signOut: element<HTMLButtonElement>('sign-out'),
  signIn: element('sign-in'),
  accountForm: element<HTMLFormElement>('account-form'),
  username: element<HTMLInputElement>('username'),
  password: element<HTMLInputElement>('password'),
  guest: element<HTMLButtonElement>('guest'),
  signInError: element('sign-in-error'),
  lobby: element('lobby'),
  lobbyStatus: element('lobby-status'),
  queue: element<HTMLButtonElement>('queue'),
  cancel: element<HTMLButtonElement>('cancel'),
  lobbyError: element('lobby-error'),
  arena: element('arena'),
  board: element<HTMLCanvasElement>('board'),
  result: element('result'),
  resultText: element('result-text'),
  resultDetail: element('result-detail'),
  again: element<HTMLButtonElement>('again'),
  youName: element('you-name'),
  youScore: element('you-score'),
  themName: element('them-name'),
  themScore: element('them-score'),
  positions: element('positions'),
  auto: element<HTMLInputElement>('auto'),
  chatForm: element<HTMLFormElement>('chat-form'),
  chatInput: element<HTMLInputElement>('chat-input'),
};

const client = createClient({ baseUrl: location.origin, tokens: savedTokens(), onTokens: saveTokens });
const board = new ArenaBoard(ui.board);
const chat = new ChatLog(element<HTMLOListElement>('chat-log'));

interface Match {
  id: string;
  opponent: string;
  opponentName: string;
  channel: string;
  view: ArenaView | null;
  finished: boolean;
}

let socket: GameSocket | null = null;
let myName = 'You';
let ticket: string | null = null;
let match: Match | null = null;
let walker: ReturnType<typeof setInterval> | null = null;
/** The tick auto-walk last stepped on: a second step before the server applied the first would overshoot. */
let walkedTick = -1;

function show(screen: 'sign-in' | 'lobby' | 'arena'): void {
  ui.signIn.hidden = screen !== 'sign-in';
  ui.lobby.hidden = screen !== 'lobby';
  ui.arena.hidden = screen !== 'arena';
  ui.signOut.hidden = screen === 'sign-in';
  ui.who.hidden = screen === 'sign-in';
}

function describe(err: unknown): string {
  if (err instanceof ServiceError) {
    if (err.code === 'guest.disabled') return 'Guest play is off on this server (the operator has to set guest_verifier_pepper).';
    // A refused form names each field's problems (under `fields` or `errors`, as the route declares).
    const fields = (err.details.fields ?? err.details.errors) as Record<string, string[]> | undefined;
    if (err.code === 'validation_failed' && fields && typeof fields === 'object') {
      const problems = Object.entries(fields).map(([field, list]) => `${field} ${Array.isArray(list) ? list.join(', ') : ''}`);
      return `${problems.join('; ')} (${err.code})`;
    }
    return `${err.message} (${err.code})`;
  }
  if (err instanceof ConnectionError) return `Cannot reach the server: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

function fail(where: HTMLElement, err: unknown): void {
  where.textContent = describe(err);
  where.hidden = false;
}

/** A player's name as others see it. */
async function nameOf(playerId: string): Promise<string> {
  try {
    const player = await client.rest.get('/api/v1/players/{id}', { path: { id: playerId } });
    return player.display_name || player.username;
  } catch {
    return 'Opponent';
  }
}

// --- Signing in -------------------------------------------------------------

ui.accountForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const action = (event.submitter as HTMLButtonElement | null)?.value === 'login' ? 'login' : 'register';
  const body = { username: ui.username.value.trim(), password: ui.password.value };
  void signIn(() => (action === 'login' ? client.login(body) : client.register(body)));
});

ui.guest.addEventListener('click', () => void signIn(() => client.guest(guestDevice())));

async function signIn(how: () => Promise<unknown>): Promise<void> {
  ui.signInError.hidden = true;
  for (const b of [ui.guest, ...ui.accountForm.querySelectorAll('button')]) b.disabled = true;
  try {
    await how();
    ui.password.value = '';
    await enterLobby();
  } catch (err) {
    fail(ui.signInError, err);
  } finally {
    for (const b of [ui.guest, ...ui.accountForm.querySelectorAll('button')]) b.disabled = false;
  }
}

ui.signOut.addEventListener('click', () => {
  stopWalking();
  socket = null;
  match = null;
  ticket = null;
  void client.logout().catch(() => undefined);
  setConnection('closed');
  show('sign-in');
});

// --- The socket -------------------------------------------------------------

function setConnection(status: string): void {
  ui.connection.dataset.status = status;
  ui.connection.textContent = { connecting: 'connecting…', connected: 'online', reconnecting: 'reconnecting…', closed: 'offline' }[status] ?? status;
}

function openSocket(): GameSocket {
  const s = client.socket({ wire: WIRE });
  s.onStatus((change) => {
    if (s !== socket) return;
    setConnection(change.status);
    if (change.status === 'connected' && s.wire === 'binary') ui.connection.textContent += ' · binary wire';
    // A new connection is a new member of the chat channel.
    if (change.status === 'connected' && change.reconnected && match) void s.request('chat.join', { channel_id: match.channel }).catch(() => undefined);
    if (change.status === 'closed' && change.reason === 'unauthenticated') show('sign-in');
  });
  s.on('match.matched', (payload) => void startMatch(payload));
  s.on('match.matchmaker_expired', () => {
    ticket = null;
    queueing(false);
    ui.lobbyStatus.textContent = 'Nobody came along in time. Try again?';
  });
  s.on('match.matchmaker_failed', (payload) => {
    ticket = null;
    queueing(false);
    ui.lobbyStatus.textContent = `The match could not start (${payload.reason}). Try again?`;
  });
  s.on('match.state', (payload) => onState(payload));
  s.on('match.scored', (payload) => {
    if (!match) return;
    const mine = payload.player_id === client.playerId;
    // The winning point's state never comes (the match finishes on that tick), so the event keeps the score.
    (mine ? ui.youScore : ui.themScore).textContent = String(payload.score);
    chat.event(`${mine ? 'You' : match.opponentName} scored (${String(payload.score)})`);
  });
  s.on('match.finished', (payload) => onFinished(payload));
  s.on('chat.message', (payload) => {
    if (!match || payload.channel_id !== match.channel) return;
    const mine = payload.sender_id === client.playerId;
    chat.say(mine ? 'you' : 'them', mine ? myName : match.opponentName, payload.content);
  });
  return s;
}

async function enterLobby(): Promise<void> {
  if (!socket || socket.status === 'closed') {
    socket = openSocket();
    await socket.connect();
  }
  const me = await client.rest.get('/api/v1/players/me');
  myName = me.display_name || me.username;
  ui.who.textContent = myName;
  ui.youName.textContent = `${myName} (you)`;
  ui.lobbyError.hidden = true;
  ui.lobbyStatus.textContent = 'Queue for the arena and the matchmaker pairs you with the next player.';
  queueing(false);
  show('lobby');
}

// --- Queueing ---------------------------------------------------------------

function queueing(on: boolean): void {
  ui.queue.hidden = on;
  ui.cancel.hidden = !on;
}

ui.queue.addEventListener('click', async () => {
  if (!socket) return;
  ui.lobbyError.hidden = true;
  ui.queue.disabled = true;
  try {
    const queued = await socket.request('matchmaker.add', { mode: MODE });
    ticket = queued.ticket_id;
    queueing(true);
    ui.lobbyStatus.textContent = 'Waiting for an opponent…';
  } catch (err) {
    fail(ui.lobbyError, err);
  } finally {
    ui.queue.disabled = false;
  }
});

ui.cancel.addEventListener('click', async () => {
  if (!socket || !ticket) return;
  try {
    await socket.request('matchmaker.remove', { ticket_id: ticket });
  } catch {
    // Matched or expired meanwhile: the push that said so decides what shows.
  }
  ticket = null;
  queueing(false);
  ui.lobbyStatus.textContent = 'Left the queue.';
});

// --- The match --------------------------------------------------------------

async function startMatch(matched: PushFrames['match.matched']): Promise<void> {
  const me = client.playerId!;
  const opponent = matched.players.find((p) => p !== me) ?? me;
  ticket = null;
  const channel = `dm:${[me, opponent].sort().join(':')}`;
  match = { id: matched.match_id, opponent, opponentName: 'Opponent', channel, view: null, finished: false };
  chat.clear();
  ui.result.hidden = true;
  ui.youScore.textContent = ui.themScore.textContent = '0';
  ui.themName.textContent = 'Opponent';
  ui.auto.checked = false;
  show('arena');
  board.draw(null);
  const current = match;
  const name = await nameOf(opponent);
  if (match !== current) return;
  current.opponentName = name;
  ui.themName.textContent = name;
  chat.event(`Matched with ${name}. First to five coins wins.`);
  // Both players' DM channel carries the match chat; nothing else is needed to use it.
  await socket?.request('chat.join', { channel_id: channel }).catch((err: unknown) => chat.event(`Chat unavailable: ${describe(err)}`));
}

function onState(payload: Record<string, unknown>): void {
  if (!match || match.finished) return;
  const view = arenaView(payload);
  if (!view) return;
  match.view = view;
  board.draw(view);
  const me = view.players[view.you];
  const them = view.players[match.opponent];
  ui.youScore.textContent = String(me?.score ?? 0);
  ui.themScore.textContent = String(them?.score ?? 0);
  const at = (p: { x: number; y: number } | undefined) => (p ? `${p.x},${p.y}` : '–');
  // Also the page's machine-readable state (tests and assistive tools read it).
  ui.board.dataset.you = at(me);
  ui.board.dataset.them = at(them);
  ui.board.dataset.coin = at(view.coin);
  ui.board.dataset.tick = String(view.tick);
  ui.positions.textContent = `You ${at(me)} · ${match.opponentName} ${at(them)} · coin ${at(view.coin)}`;
}

function onFinished(payload: PushFrames['match.finished']): void {
  if (!match || payload.match_id !== match.id) return;
  match.finished = true;
  stopWalking();
  const result = payload.result as { winner?: string; draw?: boolean; reason?: string };
  const outcome = result.draw ? 'draw' : result.winner === client.playerId ? 'won' : 'lost';
  ui.resultText.textContent = { won: 'You won!', lost: 'You lost', draw: 'A draw' }[outcome];
  ui.resultDetail.textContent =
    { score: 'Five coins.', time: 'Time ran out.', forfeit: 'Your opponent left.' }[result.reason ?? ''] ?? (result.reason ? `(${result.reason})` : '');
  ui.result.dataset.outcome = outcome;
  ui.result.hidden = false;
  chat.event(`Match over: ${ui.resultText.textContent}`);
}

ui.again.addEventListener('click', () => {
  const ended = match;
  match = null;
  if (ended) void socket?.request('chat.leave', { channel_id: ended.channel }).catch(() => undefined);
  void enterLobby().catch((err: unknown) => fail(ui.lobbyError, err));
});

function move(dx: number, dy: number): void {
  if (!match || match.finished || !socket) return;
  socket.send('match.input', { dx, dy });
}

const KEYS: Record<string, [number, number]> = {
  ArrowUp: [0, -1],
  ArrowDown: [0, 1],
  ArrowLeft: [-1, 0],
  ArrowRight: [1, 0],
  w: [0, -1],
  s: [0, 1],
  a: [-1, 0],
  d: [1, 0],
};

document.addEventListener('keydown', (event) => {
  // Keys typed into the chat are text; anywhere else (the board, the pad, the checkbox) they move.
  if (ui.arena.hidden || (event.target instanceof HTMLInputElement && event.target.type !== 'checkbox')) return;
  const step = KEYS[event.key];
  if (!step) return;
  event.preventDefault();
  move(step[0], step[1]);
});

for (const button of ui.arena.querySelectorAll<HTMLButtonElement>('.pad button')) {
  button.addEventListener('click', () => move(Number(button.dataset.dx), Number(button.dataset.dy)));
}

/** One step towards the coin per tick, like examples/clients/arena.mjs does. */
function walkTowardsCoin(): void {
  const view = match?.view;
  const me = view?.players[view.you];
  if (!view || !me || view.tick <= walkedTick) return;
  walkedTick = view.tick;
  const dx = Math.sign(view.coin.x - me.x);
  const dy = dx === 0 ? Math.sign(view.coin.y - me.y) : 0;
  if (dx !== 0 || dy !== 0) move(dx, dy);
}

function stopWalking(): void {
  if (walker) clearInterval(walker);
  walker = null;
  ui.auto.checked = false;
}

ui.auto.addEventListener('change', () => {
  if (!ui.auto.checked) return stopWalking();
  walker ??= setInterval(walkTowardsCoin, WALK_MS);
});

ui.chatForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const content = ui.chatInput.value.trim();
  if (!content || !match || !socket) return;
  socket.send('chat.send', { channel_id: match.channel, content });
  ui.chatInput.value = '';
});

window.addEventListener('resize', () => board.draw(match?.view ?? null));

// --- Start ------------------------------------------------------------------

setConnection('closed');
if (client.signedIn) {
  enterLobby().catch(() => show('sign-in'));
} else {
  show('sign-in');
}

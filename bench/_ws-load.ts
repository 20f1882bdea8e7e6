// The load generator, in its own process so the target's event loop is
// measured alone. Driven by the parent over IPC; every run is bounded in
// connections and seconds, and talks to 127.0.0.1 only.
import { createHmac } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { WebSocket } from 'ws';
import { serveParent } from './_children';

interface Conn {
  ws: WebSocket;
  onFrame: ((text: string) => void) | null;
  /** Replaces onFrame where decoding every frame to a string would cost more than the count it feeds. */
  onBytes: ((data: Buffer) => void) | null;
}

function open(port: number): Promise<Conn> {
  return new Promise((resolve, reject) => {
    // The target is trusted; validating every frame's UTF-8 is load-generator CPU taken from it.
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: false, skipUTF8Validation: true });
    const conn: Conn = { ws, onFrame: null, onBytes: null };
    ws.on('message', (data: Buffer) => (conn.onBytes ? conn.onBytes(data) : conn.onFrame?.(data.toString())));
    ws.once('open', () => resolve(conn));
    ws.once('error', reject);
  });
}

/** Opens `n` sockets, `batch` at a time, authenticating each when tokens are given. */
async function openAll(port: number, n: number, tokens: string[] | null, batch = 200, binaryFrom = Infinity): Promise<Conn[]> {
  const conns: Conn[] = [];
  for (let i = 0; i < n; i += batch) {
    const opened = await Promise.all(Array.from({ length: Math.min(batch, n - i) }, () => open(port)));
    if (tokens) {
      await Promise.all(
        opened.map(
          (c, j) =>
            new Promise<void>((resolve, reject) => {
              c.onFrame = (text) => {
                c.onFrame = null;
                if (text.includes('session.connected')) resolve();
                else reject(new Error(`connect failed: ${text}`));
              };
              // Sockets from `binaryFrom` on ask for world.tick on the binary wire.
              c.ws.send(JSON.stringify({ type: 'session.connect', cid: '1', payload: { token: tokens[i + j], ...(i + j >= binaryFrom ? { wire: 'binary' } : {}) } }));
            }),
        ),
      );
    }
    conns.push(...opened);
  }
  return conns;
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : 0;
}

const STATE = Buffer.from('{"type":"match.state"');
const FINISHED = Buffer.from('{"type":"match.finished"');
const MATCHED = Buffer.from('{"type":"match.matched"');

function startsWith(data: Buffer, prefix: Buffer): boolean {
  return data.length >= prefix.length && data.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

/**
 * One player's connection on the datagram plane (docs/datagrams.md), written here from the
 * layout the docs and test/support/datagram-client.ts state, since bench code does not import
 * test code. Only what a receiving client needs: the uplinks that bind and say bye, and
 * counting what arrives.
 */
interface PlaneConn {
  socket: Socket;
  connId: number;
  key: Buffer;
  port: number;
  cseq: number;
}

const PLANE_OP = { hello: 1, helloOk: 2, helloConfirm: 3, bye: 4, pose: 7 } as const;
const PLANE_PREFIX = 16;
const PLANE_MAC = 16;
/** A hello shorter than this is dropped unread: the reply it earns must be smaller than it. */
const PLANE_MIN_HELLO = 64;

/** An authenticated uplink: prefix (zero path tag), the next cseq, the body zero-padded to `padTo` inside the mac, the mac's first 16 bytes. */
function planeUplink(c: PlaneConn, opcode: number, body: Buffer = Buffer.alloc(0), padTo = 0): Buffer {
  const length = Math.max(PLANE_PREFIX + 8 + body.length + PLANE_MAC, padTo);
  const out = Buffer.alloc(length);
  out[0] = 0xa5;
  out[1] = 1;
  out[2] = opcode;
  out.writeUInt32LE(c.connId, 4);
  out.writeBigUInt64LE(BigInt(++c.cseq), PLANE_PREFIX);
  body.copy(out, PLANE_PREFIX + 8);
  createHmac('sha256', c.key).update(out.subarray(0, length - PLANE_MAC)).digest().copy(out, length - PLANE_MAC, 0, PLANE_MAC);
  return out;
}

function planeSend(c: PlaneConn, datagram: Buffer): Promise<void> {
  return new Promise((resolve, reject) => c.socket.send(datagram, c.port, '127.0.0.1', (err) => (err ? reject(err) : resolve())));
}

/**
 * Mints on the player's socket (`asobi.datagram.open`), binds a UDP socket of its own on
 * 127.0.0.1 (hello, hello_ok, hello_confirm) and counts every datagram that arrives on it
 * into `mine`: all its bytes, and the pose datagrams with their records.
 */
async function openPlane(conn: Conn, cid: string, mine: { planeBytes: number; poses: number; records: number }): Promise<PlaneConn> {
  const mint = await new Promise<{ conn_id: number; kup: string; endpoint: string }>((resolve, reject) => {
    conn.onFrame = (text) => {
      if (!text.startsWith('{"type":"rpc.')) return;
      const frame = JSON.parse(text) as { type: string; cid?: string; payload: { result?: { conn_id: number; kup: string; endpoint: string } } };
      if (frame.cid !== cid) return;
      if (frame.type === 'rpc.ok' && frame.payload.result) resolve(frame.payload.result);
      else reject(new Error(`asobi.datagram.open failed: ${text}`));
    };
    conn.ws.send(JSON.stringify({ type: 'rpc.call', cid, payload: { protocol: 1, method: 'asobi.datagram.open', params: {} } }));
  });
  conn.onFrame = null;
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  const c: PlaneConn = { socket, connId: mint.conn_id, key: Buffer.from(mint.kup, 'base64'), port: Number(mint.endpoint.slice(mint.endpoint.lastIndexOf(':') + 1)), cseq: 0 };
  let challenged: ((challenge: Buffer) => void) | null = null;
  socket.on('message', (raw: Buffer) => {
    if (raw.length < PLANE_PREFIX || raw[0] !== 0xa5) return;
    mine.planeBytes += raw.length;
    if (raw[2] === PLANE_OP.pose) {
      mine.poses++;
      // The body's count byte: tick u32, bseq u32, zone x and y i16, field mask u8, then count.
      mine.records += raw[PLANE_PREFIX + 13] ?? 0;
    } else if (raw[2] === PLANE_OP.helloOk) challenged?.(Buffer.from(raw.subarray(PLANE_PREFIX, PLANE_PREFIX + 8)));
  });
  // Loopback may still drop a datagram when the generator falls behind: a hello unanswered within a second is sent again, as an SDK does.
  for (let attempt = 1; ; attempt++) {
    const challenge = new Promise<Buffer | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), 1000);
      challenged = (b) => {
        clearTimeout(timer);
        resolve(b);
      };
    });
    await planeSend(c, planeUplink(c, PLANE_OP.hello, Buffer.alloc(0), PLANE_MIN_HELLO));
    const echo = await challenge;
    challenged = null;
    if (echo) {
      await planeSend(c, planeUplink(c, PLANE_OP.helloConfirm, echo));
      return c;
    }
    if (attempt === 3) {
      socket.close();
      throw new Error(`no hello_ok for conn ${c.connId} after ${attempt} hellos`);
    }
  }
}

let held: Conn[] = [];
let planes: PlaneConn[] = [];
// stateBytes: what svc's frames weigh, so bench/side-by-side.ts's bare baseline sends as much.
const matchCounters = { states: 0, stateBytes: 0, finished: 0 };
/**
 * Client gap: ms between two `match.state` frames of one socket, as a player
 * sees the tick (bench/matches.ts: p99.9 ≤ 150 ms is issue 33's bar). 1 ms
 * buckets up to 10 s; the last bucket holds anything longer.
 */
const gaps = new Uint32Array(10_001);
const worldCounters: { players: { bytes: number; frames: number; ticks: Set<number>; planeBytes: number; poses: number; records: number }[] } = { players: [] };
const WORLD_TICK = Buffer.from('{"type":"world.tick"');
const TICK_KEY = Buffer.from('"tick":');
let inputTimer: ReturnType<typeof setInterval> | null = null;

serveParent(
  {},
  {
    async heartbeat(m: { port: number; tokens: string[] | null; connections: number; seconds: number; paceMs: number }) {
      const { port, tokens, connections, seconds, paceMs } = m;
      const conns = await openAll(port, connections, tokens);
      const frame = '{"type":"session.heartbeat","payload":{}}';
      const rtts = new Float64Array(4_000_000);
      let count = 0;
      let errors = 0;
      let running = true;
      let inFlight = 0;
      const start = performance.now();
      const done = new Promise<void>((resolve) => {
        for (const c of conns) {
          let sentAt = 0;
          const fire = () => {
            if (!running) {
              if (inFlight === 0) resolve();
              return;
            }
            sentAt = performance.now();
            inFlight++;
            c.ws.send(frame);
          };
          c.onFrame = (text) => {
            inFlight--;
            const now = performance.now();
            if (text.startsWith('{"type":"error"')) errors++;
            else if (count < rtts.length) rtts[count++] = now - sentAt;
            // Paced: the next heartbeat waits out the rest of the interval (stays under the server's 60 frames/s).
            const wait = paceMs - (now - sentAt);
            if (wait > 0) setTimeout(fire, wait);
            else fire();
          };
          fire();
        }
      });
      setTimeout(() => (running = false), seconds * 1000);
      await done;
      const elapsed = (performance.now() - start) / 1000;
      const sorted = rtts.slice(0, count).sort();
      for (const c of conns) c.ws.terminate();
      return { rate: count / elapsed, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), count, errors };
    },

    async storm(m: { port: number; tokens: string[] | null; count: number; concurrency: number }) {
      // Every socket opens and authenticates at once (bounded to `concurrency`
      // in flight), as every player does after a deploy, and stays connected:
      // their old sockets closed on the node that went away, so closing these
      // belongs to no reconnect and is left out of the window.
      const { port, tokens, count, concurrency } = m;
      let next = 0;
      let failed = 0;
      const open: WebSocket[] = [];
      const started = performance.now();
      const one = (i: number) =>
        new Promise<void>((resolve) => {
          const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: false });
          ws.once('open', () => ws.send(JSON.stringify({ type: 'session.connect', cid: '1', payload: { token: tokens ? tokens[i] : 'bare' } })));
          ws.once('message', (data) => {
            // The bare target echoes; the service must answer session.connected.
            if (tokens && !data.toString().includes('session.connected')) failed++;
            open.push(ws);
            resolve();
          });
          ws.once('error', () => {
            failed++;
            resolve();
          });
        });
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < count) await one(next++);
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      for (const ws of open) ws.terminate();
      return { rate: count / seconds, seconds, failed };
    },

    async idle(m: { port: number; tokens: string[] | null; count?: number }) {
      held = await openAll(m.port, m.tokens ? m.tokens.length : m.count!, m.tokens, 500);
      return { open: held.length };
    },

    /**
     * Every socket queues for `mode` (the demo's 2-player arena unless told)
     * and, once all are matched, sends an input every `inputEvery` ticks
     * (every fifth by default: twice a second, like a casual client).
     */
    async matches(m: { port: number; tokens: string[]; mode?: string; inputEvery?: number }) {
      const mode = JSON.stringify(m.mode ?? 'arena');
      const every = m.inputEvery ?? 5;
      const conns = await openAll(m.port, m.tokens.length, m.tokens, 500);
      held = conns;
      let matched = 0;
      await new Promise<void>((resolve) => {
        for (const c of conns) {
          let last = 0;
          // At thousands of frames a second the generator shares the target's cores: compare bytes, decode nothing.
          c.onBytes = (data) => {
            if (startsWith(data, STATE)) {
              matchCounters.states++;
              matchCounters.stateBytes += data.length;
              const now = performance.now();
              if (last > 0) gaps[Math.min(gaps.length - 1, Math.round(now - last))]!++;
              last = now;
            }
            else if (startsWith(data, FINISHED)) matchCounters.finished++;
            else if (startsWith(data, MATCHED) && ++matched === conns.length) resolve();
          };
          c.ws.send(`{"type":"matchmaker.add","payload":{"mode":${mode}}}`);
        }
      });
      let k = 0;
      inputTimer = setInterval(() => {
        for (let i = k % every; i < conns.length; i += every) {
          const dx = Math.floor(Math.random() * 3) - 1;
          const dy = Math.floor(Math.random() * 3) - 1;
          conns[i]!.ws.send(`{"type":"match.input","payload":{"dx":${dx},"dy":${dy}}}`);
        }
        k++;
      }, 100);
      matchCounters.states = 0;
      matchCounters.stateBytes = 0;
      matchCounters.finished = 0;
      return { matched };
    },

    async worlds(m: { port: number; tokens: string[]; mode: string; tickMs: number; binaryFrom: number; datagramFrom?: number }) {
      // Every player joins the one world, then moves every tick; players from `binaryFrom` on are on the binary wire,
      // and those from `datagramFrom` on (binary ones) also bind the datagram plane.
      const conns = await openAll(m.port, m.tokens.length, m.tokens, 250, m.binaryFrom);
      held = conns;
      for (const c of conns) {
        await new Promise<void>((resolve, reject) => {
          c.onFrame = (text) => {
            if (text.startsWith('{"type":"world.joined"')) resolve();
            else if (text.startsWith('{"type":"error"')) reject(new Error(text));
          };
          c.ws.send(JSON.stringify({ type: 'world.find_or_create', cid: 'j', payload: { mode: m.mode } }));
        });
        c.onFrame = null;
      }
      worldCounters.players = conns.map(() => ({ bytes: 0, frames: 0, ticks: new Set<number>(), planeBytes: 0, poses: 0, records: 0 }));
      const datagramFrom = m.datagramFrom ?? conns.length;
      for (let i = datagramFrom; i < conns.length; i += 50) {
        const batch = conns.slice(i, i + 50).map((c, j) => openPlane(c, `d${i + j}`, worldCounters.players[i + j]!));
        planes.push(...(await Promise.all(batch)));
      }
      conns.forEach((c, i) => {
        const mine = worldCounters.players[i]!;
        c.onBytes = (data) => {
          mine.bytes += data.length;
          if (data[0] !== 0x7b) {
            // A binary world.tick: kind, zone x and y (i32), frame_seq (u64), kf, then the tick (u64, little-endian).
            mine.frames++;
            const n = data.length >= 26 ? data.readUInt32LE(18) : 0;
            if (n > 0) mine.ticks.add(n);
            return;
          }
          if (!startsWith(data, WORLD_TICK)) return;
          mine.frames++;
          const at = data.indexOf(TICK_KEY);
          if (at < 0) return;
          let n = 0;
          for (let j = at + TICK_KEY.length; j < data.length; j++) {
            const d = data[j]! - 48;
            if (d < 0 || d > 9) break;
            n = n * 10 + d;
          }
          if (n > 0) mine.ticks.add(n);
        };
      });
      let k = 0;
      inputTimer = setInterval(() => {
        k++;
        for (let i = 0; i < conns.length; i++) {
          const dx = Math.floor(Math.random() * 3) - 1;
          const dy = Math.floor(Math.random() * 3) - 1;
          conns[i]!.ws.send(`{"type":"world.input","seq":${k},"payload":{"dx":${dx},"dy":${dy}}}`);
        }
      }, m.tickMs);
      return { joined: conns.length };
    },

    /** Per-player bytes and world.tick frames since the last call, and the tick numbers each player saw. */
    'world-counters': () => {
      const out = worldCounters.players.map((p) => ({
        bytes: p.bytes,
        frames: p.frames,
        minTick: Math.min(...p.ticks),
        maxTick: Math.max(...p.ticks),
        ticks: p.ticks.size,
        planeBytes: p.planeBytes,
        poses: p.poses,
        records: p.records,
      }));
      for (const p of worldCounters.players) {
        p.bytes = 0;
        p.frames = 0;
        p.ticks.clear();
        p.planeBytes = 0;
        p.poses = 0;
        p.records = 0;
      }
      return { players: out };
    },

    /** Every plane connection says bye; the sockets stay open (and counted) until release, so a pose still sent to one shows. */
    'datagram-bye': async () => {
      await Promise.all(planes.map((c) => planeSend(c, planeUplink(c, PLANE_OP.bye))));
      return { bye: planes.length };
    },

    counters: () => ({ ...matchCounters }),

    /** Client gap percentiles (ms) since the last call, which starts a new window. */
    gaps: () => {
      let n = 0;
      for (const c of gaps) n += c;
      const at = (q: number) => {
        let seen = 0;
        for (let ms = 0; ms < gaps.length; ms++) if ((seen += gaps[ms]!) > q * n) return ms;
        return gaps.length - 1;
      };
      let max = 0;
      for (let ms = 0; ms < gaps.length; ms++) if (gaps[ms]! > 0) max = ms;
      const out = { count: n, p50: at(0.5), p99: at(0.99), p999: at(0.999), max };
      gaps.fill(0);
      return out;
    },

    release() {
      if (inputTimer) clearInterval(inputTimer);
      inputTimer = null;
      for (const c of held) c.ws.terminate();
      held = [];
      for (const c of planes) c.socket.close();
      planes = [];
    },
  },
);

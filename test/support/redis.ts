import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

/** The Redis the fleet tests use: REDIS_URL, else the local one .ci/run starts. */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Why the fleet tests cannot run here (Redis unreachable), or null when they can. */
export async function redisDown(): Promise<string | null> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
    return null;
  } catch (err) {
    return `Redis is not reachable at ${REDIS_URL} (${(err as Error).message}); .ci/run starts one`;
  } finally {
    redis.disconnect();
  }
}

/** Why a test cannot run a Redis of its own here (no `redis-server` on PATH), or null when it can. */
export function redisServerMissing(): string | null {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? null : 'redis-server is not on PATH; outage tests run a Redis of their own';
}

/**
 * A Redis server owned by one test file, on a port of its own, keeping
 * nothing on disk: the test stops it and starts it again on the same port to
 * cut the fleet off, and the machine's own Redis is never touched.
 */
export class OwnRedis {
  #child: ChildProcess | null = null;

  private constructor(readonly port: number) {}

  static async start(): Promise<OwnRedis> {
    const redis = new OwnRedis(await freePort());
    await redis.resume();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again, after `stop`) and resolves once it accepts connections. */
  async resume(): Promise<void> {
    if (this.#child) return;
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`redis-server on ${this.port} not ready within 10 s: ${out}`)), 10_000);
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server on ${this.port} exited with ${code}: ${out}`));
      });
    });
  }

  /** Freezes the server (SIGSTOP): its connections stay open and nothing answers, as behind a silent network fault. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  unpause(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Stops the server and resolves once its process is gone: every client's link is cut. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    if (child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP relay a fault test owns between the node and PostgreSQL, so it can
 * cut the database off the way networks do:
 * - `reset`: every open connection is reset and new ones are refused at once
 *   (a restart, a failover, a crashed host that comes back);
 * - `blackhole`: nothing flows either way and nothing is refused (a dead host,
 *   a partition that drops packets); bytes are held, as TCP would retransmit them;
 * - `pass`: relay again; held bytes go through, as after a healed partition.
 */
export class TcpProxy {
  mode: 'pass' | 'reset' | 'blackhole' = 'pass';
  readonly #pairs = new Set<Pair>();
  #server: net.Server;
  port = 0;

  private constructor(
    private readonly target: { host: string; port: number },
  ) {
    this.#server = net.createServer((client) => this.#accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.#server.address() as AddressInfo).port;
    return proxy;
  }

  /** A database URL like `url` that goes through this relay. */
  rewrite(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  reset(): void {
    this.mode = 'reset';
    for (const pair of this.#pairs) pair.destroy();
  }

  blackhole(): void {
    this.mode = 'blackhole';
  }

  restore(): void {
    this.mode = 'pass';
    for (const pair of this.#pairs) pair.flush();
  }

  /** Connections currently relayed or held. */
  get connections(): number {
    return this.#pairs.size;
  }

  async close(): Promise<void> {
    for (const pair of this.#pairs) pair.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    if (this.mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const pair = new Pair(client, this.target, () => this.mode === 'blackhole', () => this.#pairs.delete(pair));
    this.#pairs.add(pair);
  }
}

class Pair {
  readonly #upstream: net.Socket;
  #toServer: Buffer[] = [];
  #toClient: Buffer[] = [];
  #connected = false;

  constructor(
    private readonly client: net.Socket,
    target: { host: string; port: number },
    private readonly holding: () => boolean,
    private readonly onClose: () => void,
  ) {
    this.#upstream = net.connect(target.port, target.host, () => {
      this.#connected = true;
      if (!this.holding()) this.flush();
    });
    client.on('data', (chunk) => this.#relay(chunk, this.#toServer, this.#upstream));
    this.#upstream.on('data', (chunk) => this.#relay(chunk, this.#toClient, client));
    const end = () => this.destroy();
    for (const s of [client, this.#upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  }

  #relay(chunk: Buffer, held: Buffer[], to: net.Socket): void {
    if (this.holding() || !this.#connected || held.length > 0) {
      held.push(chunk);
      if (!this.holding() && this.#connected) this.flush();
      return;
    }
    to.write(chunk);
  }

  flush(): void {
    if (!this.#connected) return;
    for (const c of this.#toServer.splice(0)) this.#upstream.write(c);
    for (const c of this.#toClient.splice(0)) this.client.write(c);
  }

  destroy(): void {
    if (!this.client.destroyed) this.client.resetAndDestroy();
    if (!this.#upstream.destroyed) this.#upstream.resetAndDestroy();
    this.onClose();
  }
}

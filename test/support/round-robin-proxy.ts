import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface Backend {
  /** The node's id (`SVC_NODE_ID`), which `?node=` in a request line routes to. */
  node: string;
  port: number;
}

/**
 * A load balancer as a fleet test needs one: each new TCP connection goes to
 * the next backend in turn (HTTP requests without keep-alive and WebSocket
 * upgrades alike), except a request whose first line carries `node=<id>`
 * in its query, which goes to that node (the sticky route an operator
 * configures for "reconnect to node X"). A backend that refuses the
 * connection (a killed node) is skipped, as a balancer's health check would.
 */
export class RoundRobinProxy {
  readonly #server: net.Server;
  readonly #open = new Set<net.Socket>();
  #next = 0;
  port = 0;
  /** Which backend each accepted connection went to, in order (a test checks the spread). */
  readonly routed: string[] = [];

  private constructor(private readonly backends: Backend[]) {
    this.#server = net.createServer((client) => this.#accept(client));
  }

  static async start(backends: Backend[]): Promise<RoundRobinProxy> {
    const proxy = new RoundRobinProxy(backends);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.#server.address() as AddressInfo).port;
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    for (const s of this.#open) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #track(socket: net.Socket): void {
    this.#open.add(socket);
    socket.once('close', () => this.#open.delete(socket));
  }

  #accept(client: net.Socket): void {
    this.#track(client);
    client.on('error', () => client.destroy());
    client.once('data', (first: Buffer) => {
      client.pause();
      const line = first.subarray(0, Math.max(0, first.indexOf('\r\n'))).toString('latin1');
      const wanted = /[?&]node=([^&\s]+)/.exec(line)?.[1];
      const pinned = wanted ? this.backends.find((b) => b.node === decodeURIComponent(wanted)) : undefined;
      const order = pinned ? [pinned] : this.#rotation();
      this.#connect(client, first, order);
    });
  }

  #rotation(): Backend[] {
    const start = this.#next++ % this.backends.length;
    return [...this.backends.slice(start), ...this.backends.slice(0, start)];
  }

  #connect(client: net.Socket, first: Buffer, order: Backend[]): void {
    const [backend, ...rest] = order;
    if (!backend) return void client.destroy();
    const upstream = net.connect(backend.port, '127.0.0.1');
    this.#track(upstream);
    let connected = false;
    upstream.once('error', () => {
      upstream.destroy();
      // Refused before a byte went through: the next backend gets the connection.
      if (!connected && rest.length > 0) this.#connect(client, first, rest);
      else client.destroy();
    });
    upstream.once('connect', () => {
      connected = true;
      this.routed.push(backend.node);
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      upstream.removeAllListeners('error');
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }
}

import { Redis } from 'ioredis';
import type { RawSettings } from '../../runtime/contracts/settings';
import { freshDatabase } from './database';
import { REDIS_URL } from './redis';
import { startTestServer, type TestServer, type TestServerOptions } from './server';

/**
 * Nodes of one fleet in this process, named `<name>-<id>` (or by the ids
 * given): one database (so it runs on the embedded one too) and the
 * machine's Redis under a prefix of their own, which `close` removes.
 */
export async function startNodes(
  name: string,
  ids: readonly string[],
  settings: RawSettings = {},
  options: Omit<TestServerOptions, 'database' | 'redis'> = {},
): Promise<{ nodes: Map<string, TestServer>; close(): Promise<void> }> {
  const prefix = `svc-test-${name}-${process.pid}-${Date.now().toString(36)}:`;
  const database = await freshDatabase();
  // Each node's shutdown would close the database; none owns it.
  const shared = { ...database, close: async () => {} };
  const nodes = new Map<string, TestServer>();
  for (const id of ids) nodes.set(id, await startTestServer(settings, { ...options, database: shared, redis: { url: REDIS_URL, prefix, nodeId: id } }));
  return {
    nodes,
    async close() {
      for (const node of nodes.values()) await node.close();
      await database.close();
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    },
  };
}

/** Two nodes of one fleet in this process (`<name>-a`, `<name>-b`). */
export async function startNodePair(
  name: string,
  settings: RawSettings = {},
  options: Omit<TestServerOptions, 'database' | 'redis'> = {},
): Promise<{ a: TestServer; b: TestServer; close(): Promise<void> }> {
  const { nodes, close } = await startNodes(name, [`${name}-a`, `${name}-b`], settings, options);
  return { a: nodes.get(`${name}-a`)!, b: nodes.get(`${name}-b`)!, close };
}

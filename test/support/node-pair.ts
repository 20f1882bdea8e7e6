import { Redis } from 'ioredis';
import type { RawSettings } from '../../runtime/contracts/settings';
import { freshDatabase } from './database';
import { REDIS_URL } from './redis';
import { startTestServer, type TestServer, type TestServerOptions } from './server';

/**
 * Two nodes of one fleet in this process: one database (so it runs on the
 * embedded one too) and the machine's Redis under a prefix of their own,
 * which `close` removes.
 */
export async function startNodePair(
  name: string,
  settings: RawSettings = {},
  options: Omit<TestServerOptions, 'database' | 'redis'> = {},
): Promise<{ a: TestServer; b: TestServer; close(): Promise<void> }> {
  const prefix = `svc-test-${name}-${process.pid}-${Date.now().toString(36)}:`;
  const database = await freshDatabase();
  // Each node's shutdown would close the database; neither owns it.
  const shared = { ...database, close: async () => {} };
  const a = await startTestServer(settings, { ...options, database: shared, redis: { url: REDIS_URL, prefix, nodeId: `${name}-a` } });
  const b = await startTestServer(settings, { ...options, database: shared, redis: { url: REDIS_URL, prefix, nodeId: `${name}-b` } });
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await database.close();
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    },
  };
}

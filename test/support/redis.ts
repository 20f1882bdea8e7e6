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

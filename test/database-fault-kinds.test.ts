import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { sql } from 'kysely';
import { DatabaseDeadlineError, databaseFault } from '../runtime/platform/database';
import { freshDatabase } from './support/database';

/** An error shaped as the pg driver or node's net layer hands it over. */
function err(message: string, props: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), props);
}

describe('which database errors are an outage', () => {
  it.each([
    ['SQLSTATE 08006 connection_failure', err('connection failure', { code: '08006' })],
    ['SQLSTATE 08003 connection_does_not_exist', err('no connection', { code: '08003' })],
    ['SQLSTATE 08001 unable to connect', err('could not connect', { code: '08001' })],
    ['SQLSTATE 57P01 admin_shutdown (pg_terminate_backend, fast shutdown)', err('terminating connection due to administrator command', { code: '57P01' })],
    ['SQLSTATE 57P02 crash_shutdown', err('terminating connection because of crash of another server process', { code: '57P02' })],
    ['SQLSTATE 57P03 cannot_connect_now (starting up)', err('the database system is starting up', { code: '57P03' })],
    ['SQLSTATE 57P05 idle_session_timeout', err('terminating connection due to idle-session timeout', { code: '57P05' })],
    ['SQLSTATE 53300 too_many_connections', err('sorry, too many clients already', { code: '53300' })],
    ['ECONNREFUSED', err('connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED', errno: -111 })],
    ['ECONNRESET', err('read ECONNRESET', { code: 'ECONNRESET' })],
    ['EPIPE', err('write EPIPE', { code: 'EPIPE' })],
    ['ENOTFOUND', err('getaddrinfo ENOTFOUND db', { code: 'ENOTFOUND' })],
    ['EHOSTUNREACH', err('connect EHOSTUNREACH', { code: 'EHOSTUNREACH' })],
    ['pg: Connection terminated unexpectedly', err('Connection terminated unexpectedly')],
    ['pg: Connection terminated', err('Connection terminated')],
    ['pg: a client that lost its connection', err('Client has encountered a connection error and is not queryable')],
    ['pg: a closed client', err('Client was closed and is not queryable')],
    ['pg-pool: used after end', err('Cannot use a pool after calling end on the pool')],
  ])('%s is database_unavailable', (_name, e) => {
    expect(databaseFault(e)).toBe('database_unavailable');
  });

  it.each([
    ['SQLSTATE 57014 statement timeout', err('canceling statement due to statement timeout', { code: '57014' })],
    ['SQLSTATE 55P03 lock_not_available', err('canceling statement due to lock timeout', { code: '55P03' })],
    ['ETIMEDOUT', err('connect ETIMEDOUT', { code: 'ETIMEDOUT' })],
    ['pg-pool: waiting for a free connection', err('timeout exceeded when trying to connect')],
    ['pg-pool: connect timeout, with its cause', err('Connection terminated due to connection timeout', { cause: err('timeout expired') })],
    ['pg: query_timeout', err('Query read timeout')],
    ['our own client-side deadline', new DatabaseDeadlineError(6000)],
    ['a deadline wrapped as a cause', err('migration 0001 failed', { cause: new DatabaseDeadlineError(1000) })],
  ])('%s is database_timeout', (_name, e) => {
    expect(databaseFault(e)).toBe('database_timeout');
  });

  it.each([
    ['a unique violation', err('duplicate key value violates unique constraint', { code: '23505' })],
    ['a syntax error', err('syntax error at or near "selec"', { code: '42601' })],
    ['invalid text for the database', err('invalid byte sequence for encoding "UTF8": 0x00', { code: '22021' })],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a thrown string', 'boom'],
    ['nothing', undefined],
  ])('%s is not an outage (it stays a 500 and is logged as a bug)', (_name, e) => {
    expect(databaseFault(e)).toBeNull();
  });

  it('recognises a real refused connection from the pg driver', async () => {
    const client = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:1/test', connectionTimeoutMillis: 2000 });
    const failure = await client.connect().then(() => null, (e: unknown) => e);
    expect(databaseFault(failure)).toBe('database_unavailable');
  });

  // PGlite runs single-user inside this process and has no timer to cancel a statement with.
  it.skipIf(!process.env.DATABASE_URL)('recognises a real statement timeout from the server', async () => {
    const database = await freshDatabase();
    try {
      const failure = await database.db
        .transaction()
        .execute(async (trx) => {
          await sql`set local statement_timeout = 50`.execute(trx);
          await sql`select pg_sleep(2)`.execute(trx);
        })
        .then(() => null, (e: unknown) => e);
      expect(databaseFault(failure)).toBe('database_timeout');
    } finally {
      await database.close();
    }
  });
});

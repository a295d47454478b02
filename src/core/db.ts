// The Prisma client over the pg driver adapter (no native query engine), on a
// pool of our own so that every connection has an error listener for its whole
// life.
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.js';

export type Db = PrismaClient;

/**
 * `poolSize` connections at most; `keepOpen` of them stay open while idle
 * (the others close after 10 s idle), for work that must not wait for a
 * connection to be opened.
 */
export function createDb(connectionString: string, poolSize: number, keepOpen = 0): Db {
  const pool = new pg.Pool({ connectionString, max: poolSize, min: keepOpen, connectionTimeoutMillis: 5_000 });
  // A pg client emits 'error' when its connection breaks while no query is
  // running on it (PostgreSQL restarting, pg_terminate_backend, a network
  // reset). pg-pool listens only while the client is idle in the pool and the
  // adapter only inside its transactions; an 'error' between those windows
  // (met by the PostgreSQL-outage chaos scenario) had no listener and ended the
  // process. The error needs no handling here: the client is then not
  // queryable, its next query fails as "database unavailable" (503, job
  // retried), and the pool discards it when it comes back.
  pool.on('connect', (client) => client.on('error', () => {}));
  pool.on('error', () => {}); // an idle client's error: the pool has already dropped it
  return new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
}

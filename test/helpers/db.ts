// A fresh PostgreSQL database per test file on the local server, migrated with
// the service's own migration step, dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDb, type Db } from '../../src/core/db.js';
import { createLogger } from '../../src/core/logger.js';
import { migrate } from '../../src/core/migrate.js';

export const PG_ADMIN_URL = process.env.TEST_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export type TestDb = { name: string; url: string; db: Db; drop(): Promise<void> };

/** Runs `sql` on a connection of its own (to the server's `postgres` database unless `url` says otherwise). */
export async function adminQuery<Row = unknown>(sql: string, url = PG_ADMIN_URL): Promise<Row[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows as Row[];
  } finally {
    await c.end();
  }
}

export async function createTestDb(tag: string, options: { migrate?: boolean } = {}): Promise<TestDb> {
  const name = `ots_test_${tag}_${randomBytes(4).toString('hex')}`.toLowerCase();
  await adminQuery(`CREATE DATABASE "${name}"`);
  const url = PG_ADMIN_URL.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
  if (options.migrate !== false) await migrate(url, createLogger('silent'));
  const db = createDb(url, 5);
  return {
    name,
    url,
    db,
    async drop() {
      await db.$disconnect();
      await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

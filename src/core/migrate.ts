// Applies the SQL migrations in prisma/migrations at start-up (and as the
// `migrate` subcommand), keeping Prisma's _prisma_migrations bookkeeping (same
// table, sha256 checksums), so `prisma migrate deploy` / `status` agree where
// the Prisma CLI has its engine. An advisory lock makes concurrent starts of
// several instances apply each migration once.
import { createHash, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Logger } from './logger.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../prisma/migrations/', import.meta.url));

// Arbitrary but fixed: every instance of this service takes the same lock.
const MIGRATION_LOCK_KEY = 72_707_369;

const BOOKKEEPING_DDL = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export type Migration = { name: string; sql: string; checksum: string };

export function readMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((name) => statSync(join(dir, name)).isDirectory())
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
    });
}

export class MigrationError extends Error {
  override readonly name = 'MigrationError';
}

/** Applies pending migrations; returns the names applied by this call. */
export async function migrate(connectionString: string, log: Logger, dir = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = readMigrations(dir);
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    // Created only when missing: a role with data rights alone (the service's,
    // beside an owner role that migrates) may not run even CREATE ... IF NOT EXISTS.
    const { rows: found } = await client.query<{ t: string | null }>(`SELECT to_regclass('"_prisma_migrations"')::text AS t`);
    if (found[0]?.t == null) await client.query(BOOKKEEPING_DDL);
    const { rows } = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      'SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" WHERE rolled_back_at IS NULL',
    );
    const done = new Map(rows.map((r) => [r.migration_name, r]));
    const applied: string[] = [];
    for (const m of migrations) {
      const row = done.get(m.name);
      if (row?.finished_at) {
        if (row.checksum !== m.checksum) log.warn({ migration: m.name }, 'migration file changed after it was applied');
        continue;
      }
      if (row) throw new MigrationError(`migration ${m.name} failed earlier and needs manual repair (see _prisma_migrations)`);
      await apply(client, m);
      applied.push(m.name);
      log.info({ migration: m.name }, 'migration applied');
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
    await client.end();
  }
}

async function apply(client: pg.Client, m: Migration): Promise<void> {
  const id = randomUUID();
  await client.query('BEGIN');
  try {
    await client.query('INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at) VALUES ($1, $2, $3, now())', [id, m.checksum, m.name]);
    await client.query(m.sql);
    await client.query('UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1', [id]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    // 42501 insufficient_privilege: the service's own role, which may only read and write rows.
    const hint = (err as { code?: unknown }).code === '42501' ? ' (run the migrate command as the role owning the schema: docs/operations.md)' : '';
    throw new MigrationError(`migration ${m.name} failed: ${err instanceof Error ? err.message : String(err)}${hint}`);
  }
}

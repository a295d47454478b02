// The service's own migration step: Prisma-compatible bookkeeping, idempotent
// re-runs, one application under concurrent starts, clean failure.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { MigrationError, migrate, readMigrations } from '../../../src/core/migrate.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';

const log = createLogger('silent');
const dbs: TestDb[] = [];
afterAll(async () => {
  for (const d of dbs) await d.drop();
});

async function fresh(tag: string) {
  const d = await createTestDb(tag, { migrate: false });
  dbs.push(d);
  return d;
}

async function rows(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query('SELECT * FROM "_prisma_migrations" ORDER BY migration_name')).rows;
  } finally {
    await c.end();
  }
}

describe('migrations', () => {
  it('applies pending migrations with Prisma’s bookkeeping, once', async () => {
    const d = await fresh('mig');
    const all = readMigrations();
    expect(all.length).toBeGreaterThan(0);
    expect(await migrate(d.url, log)).toEqual(all.map((m) => m.name));
    const r = await rows(d.url);
    expect(r).toHaveLength(all.length);
    for (const [i, m] of all.entries()) {
      expect(r[i]).toMatchObject({ migration_name: m.name, applied_steps_count: 1, rolled_back_at: null, logs: null });
      expect(r[i].checksum).toBe(createHash('sha256').update(m.sql).digest('hex'));
      expect(r[i].id).toMatch(/^[0-9a-f-]{36}$/);
      expect(r[i].finished_at).toBeInstanceOf(Date);
    }
    expect(await migrate(d.url, log)).toEqual([]);
    expect(await d.db.order.count()).toBe(0); // the schema is usable through Prisma
  });

  it('applies each migration once when several instances start together', async () => {
    const d = await fresh('migc');
    const results = await Promise.all(Array.from({ length: 4 }, () => migrate(d.url, log)));
    expect(results.flat()).toEqual(readMigrations().map((m) => m.name));
    expect(await rows(d.url)).toHaveLength(readMigrations().length);
  });

  it('fails cleanly on a broken migration and leaves no half-applied state', async () => {
    const d = await fresh('migf');
    const dir = mkdtempSync(join(tmpdir(), 'migs-'));
    mkdirSync(join(dir, '001_ok'));
    writeFileSync(join(dir, '001_ok', 'migration.sql'), 'CREATE TABLE t_ok (id int);');
    mkdirSync(join(dir, '002_broken'));
    writeFileSync(join(dir, '002_broken', 'migration.sql'), 'CREATE TABLE t_half (id int); SELECT no_such_function();');
    await expect(migrate(d.url, log, dir)).rejects.toBeInstanceOf(MigrationError);
    const r = await rows(d.url);
    expect(r.map((x) => x.migration_name)).toEqual(['001_ok']);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    const t = await c.query("SELECT to_regclass('t_half') AS half, to_regclass('t_ok') AS ok");
    await c.end();
    expect(t.rows[0]).toEqual({ half: null, ok: 't_ok' });
  });
});

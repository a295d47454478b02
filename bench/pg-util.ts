// PostgreSQL in the benchmarks: one-off queries and the server's version (all
// of them), and what the PostgreSQL peers (pg-boss, graphile-worker) share:
// the database (made when missing), a schema of their own per queue, its
// size, and dropping it.
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { processCpuSeconds } from './bench-util.js';

/** A schema name from the run tag and scenario (letters, digits and underscores only). */
export function schemaName(runTag: string, scenario: string): string {
  return `${runTag}_${scenario}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
}

/** A schema (or database) name as an SQL identifier. */
export const schemaSql = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Runs `fn` on one client of its own, connected to `databaseUrl`. */
export async function withClient<T>(databaseUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** The rows of one statement, on a client of its own. */
export function pgQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<R[]> {
  return withClient(url, async (c) => (await c.query<R>(sql, params)).rows);
}

/** The server's `version()` ("PostgreSQL 15.20 (Debian ...) on x86_64-..."). */
export async function postgresVersion(url: string): Promise<string> {
  return (await pgQuery<{ version: string }>(url, 'SELECT version()'))[0]?.version ?? 'unknown';
}

/** Creates the database `databaseUrl` names when it is missing (through the server's `postgres` database). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  await withClient(url.toString(), async (c) => {
    const found = await c.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0)
      await c.query(`create database ${schemaSql(name)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // made meanwhile by another process
      });
  });
}

/** Tables of `schema` with their indexes and TOAST: what its jobs cost on disk. */
export async function schemaStorage(c: pg.Client | pg.Pool, schema: string): Promise<{ objects: number; bytes: number }> {
  const r = await c.query<{ objects: number; bytes: string }>(
    `select count(*)::int as objects, coalesce(sum(pg_total_relation_size(c.oid)), 0)::text as bytes
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relkind in ('r', 'm')`,
    [schema],
  );
  const row = r.rows[0];
  return { objects: row?.objects ?? 0, bytes: Number(row?.bytes ?? 0) };
}

export function dropSchema(databaseUrl: string, schema: string): Promise<void> {
  return withClient(databaseUrl, async (c) => {
    await c.query(`drop schema if exists ${schemaSql(schema)} cascade`);
  });
}

/**
 * CPU seconds of the PostgreSQL server behind `url` (its postmaster and every
 * backend, ended or running), when it runs on this machine and its data
 * directory is readable; else null.
 */
export async function postgresCpuSeconds(url: string): Promise<number | null> {
  try {
    const [row] = await pgQuery<{ data_directory: string }>(url, 'SHOW data_directory');
    const pid = Number(readFileSync(`${row?.data_directory}/postmaster.pid`, 'utf8').split('\n')[0]);
    return processCpuSeconds(pid, true);
  } catch {
    return null;
  }
}

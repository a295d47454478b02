// API keys: their format, and their rows in PostgreSQL. A key reads
// `ots_<key id, 32 hex>_<secret, 43 base64url>`: the prefix lets secret
// scanners find a leaked key, the id finds its row without scanning, and only
// a SHA-256 of the whole key is stored (the secret has 256 random bits, so a
// slow password hash would buy nothing). The key itself is shown once, when it
// is made, and never again.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Db } from '../db.js';
import { type Scope, SCOPES } from './scopes.js';

/** A key as the service sees it once checked: which key, the client (tenant) it acts for, and what it may do. */
export type Caller = { readonly id: string; readonly name: string; readonly client: string; readonly scopes: ReadonlySet<Scope> };

/** A key as operators list it: never its secret. */
export type ApiKeyInfo = {
  readonly id: string;
  readonly name: string;
  readonly client: string;
  readonly scopes: readonly Scope[];
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
};

export const KEY_PREFIX = 'ots_';
/** The whole key; secret scanners can use the same pattern. */
export const KEY_PATTERN = /^ots_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The key's id (a UUID) and the hash to compare with the stored one; null for anything not shaped like a key. */
export function parseKey(key: string): { id: string; hash: string } | null {
  const m = KEY_PATTERN.exec(key);
  if (!m) return null;
  const hex = m[1] as string;
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { id, hash: sha256(key) };
}

/** Equal hashes, compared in constant time (both are 64 hex characters). */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

type Row = { id: string; name: string; client: string; scopes: string[]; created_at: Date; last_used_at: Date | null; revoked_at: Date | null };
const infoOf = (r: Row): ApiKeyInfo => ({
  id: r.id,
  name: r.name,
  client: r.client,
  scopes: r.scopes.filter((s): s is Scope => (SCOPES as readonly string[]).includes(s)),
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

export function apiKeyStore(db: Db) {
  return {
    /** Makes a key; the answer holds the key itself, which nothing can show again. */
    async create(name: string, scopes: readonly Scope[], client: string): Promise<ApiKeyInfo & { key: string }> {
      const id = randomUUID();
      const key = `${KEY_PREFIX}${id.replaceAll('-', '')}_${randomBytes(32).toString('base64url')}`;
      const unique = [...new Set(scopes)];
      const [row] = await db.$queryRaw<Row[]>`
        INSERT INTO api_keys (id, name, client, scopes, secret_hash) VALUES (${id}::uuid, ${name}, ${client}, ${unique}::text[], ${sha256(key)})
        RETURNING id::text, name, client, scopes, created_at, last_used_at, revoked_at`;
      return { ...infoOf(row as Row), key };
    },

    /** Every key (of one client, when given), newest first, revoked ones included (they say so). */
    async list(client?: string): Promise<ApiKeyInfo[]> {
      const rows = await db.$queryRaw<Row[]>`
        SELECT id::text, name, client, scopes, created_at, last_used_at, revoked_at FROM api_keys
         WHERE ${client === undefined} OR client = ${client ?? ''}
         ORDER BY created_at DESC, id`;
      return rows.map(infoOf);
    },

    /** Revokes a key; the key as it now is, or null when there is none with that id. Revoking twice keeps the first time. */
    async revoke(id: string): Promise<ApiKeyInfo | null> {
      const [row] = await db.$queryRaw<Row[]>`
        UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = ${id}::uuid
        RETURNING id::text, name, client, scopes, created_at, last_used_at, revoked_at`;
      return row ? infoOf(row) : null;
    },

    /** Whether any key exists (revoked ones count: the development key is made only on a fresh database). */
    async any(): Promise<boolean> {
      const [row] = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM (SELECT 1 FROM api_keys LIMIT 1) k`;
      return (row?.n ?? 0) > 0;
    },

    /** The client a key stands for, or null for an unknown, wrong or revoked key. */
    async verify(key: string): Promise<Caller | null> {
      const parsed = parseKey(key);
      if (!parsed) return null;
      const [row] = await db.$queryRaw<(Row & { secret_hash: string })[]>`
        SELECT id::text, name, client, scopes, secret_hash, created_at, last_used_at, revoked_at FROM api_keys WHERE id = ${parsed.id}::uuid`;
      if (!row || !sameHash(row.secret_hash, parsed.hash) || row.revoked_at) return null;
      return { id: row.id, name: row.name, client: row.client, scopes: new Set(infoOf(row).scopes) };
    },

    /** Records that a key was used (at most once a minute per key in the database). */
    async touch(id: string): Promise<void> {
      await db.$executeRaw`
        UPDATE api_keys SET last_used_at = now()
        WHERE id = ${id}::uuid AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
    },
  };
}
export type ApiKeyStore = ReturnType<typeof apiKeyStore>;

// Each client's own Standard Webhooks secrets, which sign its timers' webhook
// calls (so a client's receiver cannot be fed another client's timers): made
// by the admin API and shown once as `whsec_<base64>`, at most two live per
// client (the rotation window: the receiver knows the old one while it learns
// the new), kept in PostgreSQL (client_webhook_secrets). The delivery path
// reads them through a per-client cache: a rotation or a removal reaches every
// instance within `cacheMs` (5 s by default) of its commit.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Db } from './db.js';

/** A secret as the admin API lists it: never the secret itself. */
export type ClientWebhookSecretInfo = { readonly id: string; readonly createdAt: Date };

/** A secret as it is made: the only time its text is shown. */
export type CreatedClientWebhookSecret = ClientWebhookSecretInfo & { readonly client: string; readonly secret: string };

/** How long `keysFor`'s answer is believed, from its lookup's start: the bound on how late a rotation reaches an instance. */
export const CLIENT_SECRETS_CACHE_MS = 5_000;

/** Random bytes of a secret (the Standard Webhooks libraries take 24..64). */
const SECRET_BYTES = 32;
/** Live secrets per client: the newest and, during a rotation, the one before it. */
const LIVE_SECRETS = 2;
/**
 * The first key of the two-key advisory locks that serialise one client's
 * creates (the second is the client's hashtext). Two-key locks are a key
 * space of their own: they never meet the migrations' one-key lock.
 */
const CREATE_LOCK_CLASS = 0x77687365; // 'whse'
/** Cached clients at most; past it the cache starts afresh (a flood of distinct clients cannot grow it without bound). */
const CACHE_MAX = 10_000;

const SECRET_PREFIX = 'whsec_';

type InfoRow = { id: string; created_at: Date };

export function createClientWebhookSecrets(db: Db, opts: { cacheMs?: number } = {}) {
  const cacheMs = opts.cacheMs ?? CLIENT_SECRETS_CACHE_MS;
  const cache = new Map<string, { started: number; keys: Promise<Buffer[]> }>();

  const lookUp = async (client: string): Promise<Buffer[]> => {
    const rows = await db.$queryRaw<{ secret: Uint8Array }[]>`
      SELECT secret FROM client_webhook_secrets WHERE client = ${client} ORDER BY created_at DESC, id DESC`;
    return rows.map((r) => Buffer.from(r.secret));
  };

  return {
    /**
     * Makes a secret for `client` and, in the same transaction, deletes its
     * secrets older than the two newest. The answer holds the secret's text,
     * which nothing can show again.
     *
     * Two statements: the client's lock, then the insert with its trim. The
     * lock makes a second create of the same client wait for the first to
     * commit, and the insert, its own statement, then sees that create's row:
     * without it, two concurrent creates would each keep the two newest they
     * saw and leave three. Under the lock a new row is also strictly newer
     * than every other of its client (a millisecond past the newest at
     * least), so "the two newest" is never a tie. The trim's subquery sees
     * the rows as they were before the insert, so it keeps one of them.
     */
    async create(client: string): Promise<CreatedClientWebhookSecret> {
      const id = randomUUID();
      const secret = randomBytes(SECRET_BYTES);
      const [, rows] = await db.$transaction([
        db.$executeRaw`SELECT pg_advisory_xact_lock(${CREATE_LOCK_CLASS}::int, hashtext(${client}))`,
        db.$queryRaw<InfoRow[]>`
          WITH made AS (
            INSERT INTO client_webhook_secrets (id, client, secret, created_at)
            SELECT ${id}::uuid, ${client}, ${secret}, GREATEST(clock_timestamp()::timestamptz(3), max(created_at) + interval '1 millisecond')
              FROM client_webhook_secrets WHERE client = ${client}
            RETURNING id::text, created_at
          ), trimmed AS (
            DELETE FROM client_webhook_secrets
             WHERE client = ${client}
               AND id NOT IN (SELECT id FROM client_webhook_secrets WHERE client = ${client}
                               ORDER BY created_at DESC, id DESC LIMIT ${LIVE_SECRETS - 1}::int)
          )
          SELECT id, created_at FROM made`,
      ]);
      cache.delete(client);
      const row = rows[0] as InfoRow;
      return { id: row.id, client, secret: `${SECRET_PREFIX}${secret.toString('base64')}`, createdAt: row.created_at };
    },

    /** The client's live secrets, newest first, without the secrets themselves. */
    async list(client: string): Promise<ClientWebhookSecretInfo[]> {
      const rows = await db.$queryRaw<InfoRow[]>`
        SELECT id::text, created_at FROM client_webhook_secrets WHERE client = ${client} ORDER BY created_at DESC, id DESC`;
      return rows.map((r) => ({ id: r.id, createdAt: r.created_at }));
    },

    /** Deletes one of the client's secrets; false when it has none with that id (another client's id included). */
    async remove(client: string, id: string): Promise<boolean> {
      const n = await db.$executeRaw`DELETE FROM client_webhook_secrets WHERE client = ${client} AND id = ${id}::uuid`;
      cache.delete(client);
      return n > 0;
    },

    /**
     * The keys that sign the client's webhook calls, newest first (empty when
     * it has none), for the delivery path. An answer is believed until
     * `cacheMs` after its lookup started, and a call joins a running lookup
     * only if that started less than `cacheMs` ago: one query per client per
     * `cacheMs` at most, and a secret made or removed on another instance is
     * used (or no longer used) here within `cacheMs` of its commit, however
     * slow the query. A failed lookup is not kept: the next call asks again.
     */
    keysFor(client: string): Promise<Buffer[]> {
      const now = Date.now();
      const hit = cache.get(client);
      if (hit && hit.started > now - cacheMs) return hit.keys;
      if (cache.size >= CACHE_MAX) cache.clear();
      const entry = { started: now, keys: lookUp(client) };
      cache.set(client, entry);
      entry.keys.catch(() => cache.get(client) === entry && cache.delete(client));
      return entry.keys;
    },
  };
}
export type ClientWebhookSecrets = ReturnType<typeof createClientWebhookSecrets>;

// Create under an Idempotency-Key, the one way every create endpoint does it:
// a request repeated with the same key and body is answered with what the
// first one made; the same key with another body is refused (422); two
// requests racing with one key both end with the row the winner wrote (the
// unique index decides, the loser replays it).
import { isDatabaseUnavailable, isUniqueViolation } from './db-errors.js';
import { AppError } from './errors.js';
import { type Gatherer, createGatherer, settleEach } from './gather.js';
import { requestHash } from './http/idempotency-key.js';

/** A row made under a key, with the hash of the request body that made it. */
export type Stored<T> = { readonly row: T; readonly requestHash: string | null };

export async function createIdempotently<T>(o: {
  /** The request's Idempotency-Key, or null (then it simply creates). */
  readonly key: string | null;
  /** The request body: its hash tells a true repeat from a reuse of the key. */
  readonly body: unknown;
  readonly find: (key: string) => Promise<Stored<T> | null>;
  /** Creates the row, storing the key and the body's hash with it (null without a key). */
  readonly insert: (key: string | null, hash: string | null) => Promise<T>;
  /** Runs on every replay (e.g. schedules again a job the first request's Redis call may have missed). */
  readonly onReplay?: (row: T) => Promise<void>;
}): Promise<{ row: T; replayed: boolean }> {
  const hash = o.key ? requestHash(o.body) : null;
  const replay = async (key: string) => {
    const existing = await o.find(key);
    if (!existing) return null;
    if (existing.requestHash !== hash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 422, 'this Idempotency-Key was used with a different request body');
    }
    await o.onReplay?.(existing.row);
    return { row: existing.row, replayed: true };
  };
  if (o.key) {
    const r = await replay(o.key);
    if (r) return r;
  }
  try {
    return { row: await o.insert(o.key, hash), replayed: false };
  } catch (err) {
    // Two requests with one key raced; the loser answers with the winner's row.
    if (o.key && isUniqueViolation(err)) {
      const r = await replay(o.key);
      if (r) return r;
    }
    throw err;
  }
}

/**
 * Concurrent creates share one INSERT statement (`insertMany`: all or none,
 * answering in input order). A row that fails it (an Idempotency-Key race)
 * must not fail the others, so a failed batch is retried row by row, unless
 * the database is not there at all. Rows sharing a key are retried one after
 * another in arrival order, so the first one wins, as it would have without
 * the batch; the rest run side by side.
 */
export function gatherCreates<I extends { readonly idempotencyKey: string | null }, O>(
  insertMany: (rows: readonly I[]) => Promise<readonly O[]>,
  maxBatch: number,
): Gatherer<I, O> {
  return createGatherer<I, O>(async (rows) => {
    try {
      return (await insertMany(rows)).map((value) => ({ ok: true, value }));
    } catch (err) {
      if (rows.length === 1 || isDatabaseUnavailable(err)) throw err;
      const sameKeyBefore = new Map<string, Promise<unknown>>();
      return settleEach(rows, (row) => {
        const insertOne = async () => (await insertMany([row]))[0] as O;
        if (row.idempotencyKey === null) return insertOne();
        const turn = (sameKeyBefore.get(row.idempotencyKey) ?? Promise.resolve()).then(insertOne, insertOne);
        sameKeyBefore.set(row.idempotencyKey, turn);
        return turn;
      });
    }
  }, maxBatch);
}

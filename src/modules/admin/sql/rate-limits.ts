// The run-time rate limits' rows (table queue_rate_limits): one statement per
// change. Set: an upsert by scope (one statement, so two operators setting the
// same scope at once end with one row, the last writer's). Removed: a delete
// by scope answering whether there was one. Listed: every row, by scope.
// Guard: the primary key (one row per scope). Lock order: the one row.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import type { LimitRule } from '../../../queue/index.js';

/** Sets the limit of `rule.scope` (created or replaced). */
export async function upsertRateLimit(db: Db, rule: LimitRule): Promise<void> {
  await db.$executeRaw(Prisma.sql`
    INSERT INTO queue_rate_limits (scope, count, interval_ms, changed_at) VALUES (${rule.scope}, ${rule.count}, ${rule.intervalMs}, now())
    ON CONFLICT (scope) DO UPDATE SET count = EXCLUDED.count, interval_ms = EXCLUDED.interval_ms, changed_at = now()`);
}

/** Removes the limit of `scope`; false when it had none. */
export async function deleteRateLimit(db: Db, scope: string): Promise<boolean> {
  return (await db.$executeRaw(Prisma.sql`DELETE FROM queue_rate_limits WHERE scope = ${scope}`)) > 0;
}

/** Every run-time limit, by scope. */
export async function listRateLimits(db: Db): Promise<LimitRule[]> {
  const rows = await db.$queryRaw<{ scope: string; count: number; intervalMs: number }[]>(
    Prisma.sql`SELECT scope, count, interval_ms AS "intervalMs" FROM queue_rate_limits ORDER BY scope`,
  );
  return rows.map((r) => ({ scope: r.scope, count: Number(r.count), intervalMs: Number(r.intervalMs) }));
}

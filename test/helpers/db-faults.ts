// Database faults for tests: a trigger on `notifications` makes one kind of
// write to chosen rows fail, as if the database dropped the statement (a
// connection lost mid-way), a given number of times or until healed. Each
// fault has its own trigger, function and counter, so faults never meet; the
// counter is a sequence because nextval survives the failed statement's rollback.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../src/core/db.js';

/**
 * The write that records a call's outcome: `sent` is the SENT mark (a row
 * becoming SENT); `failure` is the failure record (a SENDING row counted
 * without becoming SENT). Claims and withdrawals change no count, so they
 * pass, and so does the ending of a withdrawn row.
 */
export type NotificationWrite = 'sent' | 'failure';

const WRITE: Record<NotificationWrite, string> = {
  sent: `NEW.status = 'SENT' AND OLD.status <> 'SENT'`,
  failure: `OLD.status = 'SENDING' AND NEW.status <> 'SENT' AND NEW.attempts <> OLD.attempts`,
};

export type DbFault = {
  /** Statements failed so far. */
  failures(): Promise<number>;
  /** The database is back: the trigger, its function and its counter go (safe to call twice). */
  heal(): Promise<void>;
};

const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;

/**
 * Fails the `write` to the rows `of` (one row by id, or the rows of one
 * recipient: a reminder's, known before its row exists) `times` times, or
 * every time until `heal()`.
 */
export async function failNotificationWrites(
  db: Db,
  o: { write: NotificationWrite; of: { id: string } | { recipient: string }; times?: number },
): Promise<DbFault> {
  const name = `test_fault_${randomBytes(4).toString('hex')}`;
  const row = 'id' in o.of ? `OLD.id = ${literal(o.of.id)}::uuid` : `OLD.recipient = ${literal(o.of.recipient)}`;
  const limit = o.times === undefined ? 'true' : `n <= ${Math.trunc(o.times)}`;
  await db.$executeRawUnsafe(`CREATE SEQUENCE ${name}_calls`);
  await db.$executeRawUnsafe(
    `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
       DECLARE n bigint := nextval('${name}_calls');
       BEGIN
         IF ${limit} THEN RAISE EXCEPTION 'simulated database fault (%, statement %)', '${name}', n; END IF;
         RETURN NEW;
       END $$`,
  );
  await db.$executeRawUnsafe(
    `CREATE TRIGGER ${name} BEFORE UPDATE ON notifications FOR EACH ROW
       WHEN (${row} AND ${WRITE[o.write]}) EXECUTE FUNCTION ${name}()`,
  );
  let healed: number | null = null;
  async function failures(): Promise<number> {
    if (healed !== null) return healed;
    const [r] = await db.$queryRawUnsafe<{ n: bigint }[]>(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM ${name}_calls`);
    const calls = Number(r?.n ?? 0);
    return o.times === undefined ? calls : Math.min(calls, o.times);
  }
  return {
    failures,
    async heal() {
      if (healed !== null) return;
      const n = await failures();
      await db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${name} ON notifications`);
      await db.$executeRawUnsafe(`DROP FUNCTION IF EXISTS ${name}()`);
      await db.$executeRawUnsafe(`DROP SEQUENCE IF EXISTS ${name}_calls`);
      healed = n;
    },
  };
}

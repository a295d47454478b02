// An area set: its vehicle plate, sorter contact and batching rule (its own
// batch size and maximum wait, null for the defaults), created or replaced.
// One statement (an upsert) on the area's key, (client, code): another
// client's area of the same code is another row, never touched. Guard: none,
// the last write wins; a batch made after it is bound to the new vehicle and
// judged by the new rule, one made before keeps the plate it was made with.
// Every write raises the rule's version (under the row's lock, so two PUTs
// get two versions in their commit order): the Redis group refuses a rule
// older than its own. Lock order: the one area row. Returns the area.
import type { Db } from '../../../core/db.js';
import type { AreaRow } from './parcel-row.js';

/** What a PUT sets: every field (a rule's null part is the default). */
export type AreaSettings = { vehiclePlate: string; sorterContact: string; batchSize: number | null; maxWaitSeconds: number | null };

export async function upsertArea(db: Db, client: string, code: string, s: AreaSettings): Promise<AreaRow> {
  return db.area.upsert({
    where: { client_code: { client, code } },
    create: { client, code, ...s },
    update: { ...s, updatedAt: new Date(), ruleVersion: { increment: 1 } },
  });
}

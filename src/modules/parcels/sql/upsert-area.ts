// An area set: its vehicle plate and sorter contact, created or replaced.
// One statement (an upsert) on the area's key, (client, code): another
// client's area of the same code is another row, never touched. Guard: none,
// the last write wins; a batch made after it is bound to the new vehicle, one
// made before keeps the plate it was made with. Lock order: the one area row.
// Returns the area.
import type { Db } from '../../../core/db.js';
import type { AreaRow } from './parcel-row.js';

export async function upsertArea(db: Db, client: string, code: string, vehiclePlate: string, sorterContact: string): Promise<AreaRow> {
  return db.area.upsert({
    where: { client_code: { client, code } },
    create: { client, code, vehiclePlate, sorterContact },
    update: { vehiclePlate, sorterContact, updatedAt: new Date() },
  });
}

-- The parcels of a batch by batch_id, and only those: a WAITING parcel has
-- none, and its NULL cost every parcel an index entry at intake that nothing
-- reads (the batch commit finds parcels by key). Partial, so not expressible
-- in schema.prisma: kept here.
-- This runs in the migration's transaction, where CONCURRENTLY cannot. The
-- table is locked first against every writer and locker (plain reads go on):
-- a batch commit let in during the build would hold its row lock while it
-- waited to write, and the DROP below would then deadlock with it. Built under
-- a new name, the old index dropped last.
LOCK TABLE "parcels" IN EXCLUSIVE MODE;
CREATE INDEX "parcels_batch_id_partial_idx" ON "parcels"("batch_id") WHERE "batch_id" IS NOT NULL;
DROP INDEX "parcels_batch_id_idx";
ALTER INDEX "parcels_batch_id_partial_idx" RENAME TO "parcels_batch_id_idx";

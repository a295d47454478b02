-- The parcels of a batch by batch_id, and only those: a WAITING parcel has
-- none, and its NULL cost every parcel an index entry at intake that nothing
-- reads (the batch commit finds parcels by key). Partial, so not expressible
-- in schema.prisma: kept here.
-- Built under a new name while reads go on (writes to parcels wait: this runs
-- in the migration's transaction, where CONCURRENTLY cannot); the old index
-- is dropped last, so its exclusive lock lasts only until the commit.
CREATE INDEX "parcels_batch_id_partial_idx" ON "parcels"("batch_id") WHERE "batch_id" IS NOT NULL;
DROP INDEX "parcels_batch_id_idx";
ALTER INDEX "parcels_batch_id_partial_idx" RENAME TO "parcels_batch_id_idx";

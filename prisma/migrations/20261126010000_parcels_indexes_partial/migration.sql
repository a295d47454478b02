-- Parcels indexed only where a query reads them: the WAITING ones by arrival
-- (the reconciliation pass and GET /areas/:code read only those), and a
-- batch's parcels by batch_id (a WAITING parcel has none). The full indexes
-- grew with every parcel ever taken in, and each parcel cost two more index
-- entries: one at intake (its NULL batch_id), one when it was batched (its
-- new status). Partial, so not expressible in schema.prisma: kept here.
-- Building them reads the table once while writes to it wait (this runs in
-- the migration's transaction, where CONCURRENTLY cannot).
CREATE INDEX "parcels_waiting_created_at_idx" ON "parcels"("created_at") WHERE "status" = 'WAITING';
DROP INDEX "parcels_status_created_at_idx";
DROP INDEX "parcels_batch_id_idx";
CREATE INDEX "parcels_batch_id_idx" ON "parcels"("batch_id") WHERE "batch_id" IS NOT NULL;

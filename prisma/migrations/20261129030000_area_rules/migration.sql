-- Per-area batching rules, manual flush and withdrawn parcels (docs/api/parcels.md).
-- An area's own batch size and maximum wait; null: the service's defaults
-- (PARCEL_BATCH_SIZE, PARCEL_MAX_WAIT_SECONDS).
ALTER TYPE "ParcelStatus" ADD VALUE 'WITHDRAWN';
ALTER TYPE "BatchReason" ADD VALUE 'MANUAL';

ALTER TABLE "areas" ADD COLUMN "batch_size" INTEGER, ADD COLUMN "max_wait_seconds" INTEGER;
-- The API refuses anything else before it gets here; these hold every other writer to the same ranges.
ALTER TABLE "areas" ADD CONSTRAINT "areas_batch_size_range" CHECK ("batch_size" BETWEEN 1 AND 1000),
                    ADD CONSTRAINT "areas_max_wait_seconds_range" CHECK ("max_wait_seconds" BETWEEN 1 AND 86400);

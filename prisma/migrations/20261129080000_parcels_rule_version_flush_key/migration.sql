-- Parcels (docs/api/parcels.md).
-- An area's rule version, raised by every PUT /areas/:code and stored with the
-- rule in its Redis group: a put back or a late call carrying a rule read
-- before a newer one was set is refused there instead of undoing it.
ALTER TABLE "areas" ADD COLUMN "rule_version" INTEGER NOT NULL DEFAULT 1;

-- A manual flush's Idempotency-Key (scoped to the client) and the hash of its
-- request: a retried flush answers the batch the first one made.
ALTER TABLE "batches" ADD COLUMN "idempotency_key" VARCHAR(320), ADD COLUMN "request_hash" CHAR(64);
CREATE UNIQUE INDEX "batches_idempotency_key_key" ON "batches"("idempotency_key");

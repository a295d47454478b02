-- CreateIndex
CREATE INDEX "batches_created_at_idx" ON "batches"("created_at");


-- CreateEnum
CREATE TYPE "ParcelStatus" AS ENUM ('WAITING', 'BATCHED');

-- CreateEnum
CREATE TYPE "BatchReason" AS ENUM ('FULL', 'TIMEOUT');

-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "batch_id" UUID;

-- CreateTable
CREATE TABLE "areas" (
    "code" VARCHAR(32) NOT NULL,
    "vehicle_plate" VARCHAR(16) NOT NULL,
    "sorter_contact" VARCHAR(254) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "areas_pkey" PRIMARY KEY ("code")
);

-- CreateTable
CREATE TABLE "parcels" (
    "tracking_no" VARCHAR(64) NOT NULL,
    "area_code" VARCHAR(32) NOT NULL,
    "status" "ParcelStatus" NOT NULL DEFAULT 'WAITING',
    "batch_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "batched_at" TIMESTAMPTZ(3),

    CONSTRAINT "parcels_pkey" PRIMARY KEY ("tracking_no")
);

-- CreateTable
CREATE TABLE "batches" (
    "id" UUID NOT NULL,
    "area_code" VARCHAR(32) NOT NULL,
    "vehicle_plate" VARCHAR(16) NOT NULL,
    "reason" "BatchReason" NOT NULL,
    "parcel_count" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "batches_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "parcels_status_created_at_idx" ON "parcels"("status", "created_at");

-- CreateIndex
CREATE INDEX "parcels_batch_id_idx" ON "parcels"("batch_id");

-- CreateIndex
CREATE INDEX "batches_area_code_created_at_idx" ON "batches"("area_code", "created_at");

-- CreateIndex
CREATE INDEX "notifications_batch_id_idx" ON "notifications"("batch_id");

-- AddForeignKey
ALTER TABLE "parcels" ADD CONSTRAINT "parcels_area_code_fkey" FOREIGN KEY ("area_code") REFERENCES "areas"("code") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "parcels" ADD CONSTRAINT "parcels_batch_id_fkey" FOREIGN KEY ("batch_id") REFERENCES "batches"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "batches" ADD CONSTRAINT "batches_area_code_fkey" FOREIGN KEY ("area_code") REFERENCES "areas"("code") ON DELETE RESTRICT ON UPDATE CASCADE;


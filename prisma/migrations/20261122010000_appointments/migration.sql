-- CreateEnum
CREATE TYPE "AppointmentStatus" AS ENUM ('BOOKED', 'CANCELLED');

-- CreateEnum
CREATE TYPE "Channel" AS ENUM ('SMS', 'EMAIL');

-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "appointment_id" UUID,
ADD COLUMN     "channel" "Channel",
ADD COLUMN     "recipient" VARCHAR(254);

-- CreateTable
CREATE TABLE "appointments" (
    "id" UUID NOT NULL,
    "customer_id" VARCHAR(64) NOT NULL,
    "contact" VARCHAR(254) NOT NULL,
    "channel" "Channel" NOT NULL,
    "status" "AppointmentStatus" NOT NULL DEFAULT 'BOOKED',
    "starts_at" TIMESTAMPTZ(3) NOT NULL,
    "remind_before_seconds" INTEGER NOT NULL,
    "remind_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "cancelled_at" TIMESTAMPTZ(3),
    "idempotency_key" VARCHAR(255),
    "request_hash" CHAR(64),

    CONSTRAINT "appointments_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "appointments_idempotency_key_key" ON "appointments"("idempotency_key");

-- CreateIndex
CREATE INDEX "appointments_status_remind_at_idx" ON "appointments"("status", "remind_at");

-- CreateIndex
CREATE INDEX "notifications_appointment_id_idx" ON "notifications"("appointment_id");

-- CreateIndex
CREATE INDEX "notifications_status_created_at_idx" ON "notifications"("status", "created_at");


-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "sending_due_at" TIMESTAMPTZ(3);

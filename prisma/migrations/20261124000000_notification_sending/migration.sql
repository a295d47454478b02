-- AlterEnum
ALTER TYPE "NotificationStatus" ADD VALUE 'SENDING';

-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "sending_at" TIMESTAMPTZ(3),
ADD COLUMN     "withdrawn_at" TIMESTAMPTZ(3);

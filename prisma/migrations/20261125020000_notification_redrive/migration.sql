-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "redrive_requested" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "refused" BOOLEAN NOT NULL DEFAULT false;

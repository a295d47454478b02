-- AlterEnum
ALTER TYPE "NotificationStatus" ADD VALUE 'CANCELLED';


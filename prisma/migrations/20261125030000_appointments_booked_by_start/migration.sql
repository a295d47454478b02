-- The appointments reconciliation pass looks for overdue reminders only among
-- BOOKED appointments not yet started (or started moments ago): this index
-- holds exactly those ranges, so a pass reads what is ahead, never the
-- history behind. Partial, so not expressible in schema.prisma: kept here.
CREATE INDEX "appointments_booked_starts_at_remind_at_idx" ON "appointments"("starts_at", "remind_at") WHERE "status" = 'BOOKED';

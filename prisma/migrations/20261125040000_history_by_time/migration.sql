-- History read by time, not whole: the daily report reads the orders of its
-- day (and the days before whose payment or cancellation may fall on it) and
-- the notifications sent on its day, and the retention pass deletes the
-- oldest terminal orders, each through one of these indexes instead of
-- reading every row ever written.
CREATE INDEX "orders_created_at_idx" ON "orders"("created_at");
-- Partial (a row gets its entry when it is marked SENT), so not expressible in
-- schema.prisma: kept here.
CREATE INDEX "notifications_sent_at_idx" ON "notifications"("sent_at") WHERE "sent_at" IS NOT NULL;

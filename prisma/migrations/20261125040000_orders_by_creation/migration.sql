-- Orders by creation time: the daily report reads the orders of its day (and
-- the days before whose payment or cancellation may fall on it) and the
-- retention pass deletes the oldest terminal orders, both by this index
-- instead of reading every order ever taken.
CREATE INDEX "orders_created_at_idx" ON "orders"("created_at");

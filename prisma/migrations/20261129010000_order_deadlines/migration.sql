-- Order deadlines (docs/api/orders.md): a payment deadline that moves
-- (PATCH /orders/{id}, POST /admin/orders/extend) and the payment reminder
-- written before it (a delivery row of kind ORDER_PAYMENT_REMINDER).
ALTER TYPE "NotificationKind" ADD VALUE 'ORDER_PAYMENT_REMINDER';

-- The reminder's lead (null: none) and its time, expires_at minus the lead,
-- kept by every statement that moves the deadline (null: none, or it would
-- fall before the order was made). The latest move's Idempotency-Key and body
-- hash, so a retried move answers the same and moves nothing.
ALTER TABLE "orders"
  ADD COLUMN "payment_reminder_before_seconds" INTEGER,
  ADD COLUMN "payment_remind_at" TIMESTAMPTZ(3),
  ADD COLUMN "deadline_move_key" VARCHAR(320),
  ADD COLUMN "deadline_move_hash" CHAR(64);

-- The reconciliation pass's reminders to repair: UNPAID orders by their
-- remind time, and only those with one (an order without a reminder costs no
-- index entry at create). Partial, so not expressible in schema.prisma.
CREATE INDEX "orders_payment_remind_at_idx" ON "orders"("payment_remind_at")
  WHERE "status" = 'UNPAID' AND "payment_remind_at" IS NOT NULL;

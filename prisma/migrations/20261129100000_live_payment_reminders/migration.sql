-- The live payment reminders by order: the expiry withdraws those of the orders
-- it cancelled (a few rows at most, where notifications_order_id_idx holds every
-- notification an order ever had: 500 probes of it were 6.5 ms of a batch).
CREATE INDEX "notifications_live_payment_reminder_idx" ON "notifications" ("order_id")
  WHERE "kind" = 'ORDER_PAYMENT_REMINDER' AND "withdrawn_at" IS NULL AND "status" IN ('PENDING', 'FAILED', 'SENDING');

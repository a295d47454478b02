-- Timers: a client's keyed delayed deliveries (docs/api/timers.md). A timer
-- is a name (client, key) and its firings; each firing is a delivery row of
-- kind TIMER (the delivery room's state machine), `due_at` its fire time.
ALTER TYPE "NotificationKind" ADD VALUE 'TIMER';

CREATE TABLE "timers" (
  "id" UUID NOT NULL,
  "client" VARCHAR(64) NOT NULL DEFAULT 'default',
  -- Byte order (C): a client's list pages by key through the unique index.
  "key" VARCHAR(200) COLLATE "C" NOT NULL,
  -- The current firing's delivery row (no foreign key: the row names its
  -- timer, and both are written by one statement).
  "notification_id" UUID NOT NULL,
  -- Firings made so far: the next one's dedupe key is 'timer:<id>:<firings + 1>'.
  "firings" INTEGER NOT NULL DEFAULT 1,
  -- Debounce: when the current burst's first call came, and how long after
  -- it the firing may be pushed at most (null: not a debounced firing).
  "burst_started_at" TIMESTAMPTZ(3),
  "max_wait_ms" BIGINT,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  CONSTRAINT "timers_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "timers_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$'),
  CONSTRAINT "timers_key_check" CHECK ("key" ~ '^[A-Za-z0-9_.:-]{1,200}$')
);
CREATE UNIQUE INDEX "timers_client_key_key" ON "timers" ("client", "key");
-- The retention pass reads timers by last change.
CREATE INDEX "timers_updated_at_idx" ON "timers" ("updated_at", "id");

-- A timer's delivery rows, and their fire time: no delivery claims a row
-- before it (the claim compares the delivery's own due time, Redis clock).
ALTER TABLE "notifications" ADD COLUMN "timer_id" UUID;
ALTER TABLE "notifications" ADD COLUMN "due_at" TIMESTAMPTZ(3);
ALTER TABLE "notifications" ADD CONSTRAINT "notifications_timer_id_fkey"
  FOREIGN KEY ("timer_id") REFERENCES "timers" ("id") ON DELETE NO ACTION ON UPDATE CASCADE;
CREATE INDEX "notifications_timer_id_idx" ON "notifications" ("timer_id");

-- Each client's webhook signing secrets for its timers (two at a time during
-- a rotation): a client's receiver checks its own, so it cannot be fed
-- another client's timers.
CREATE TABLE "client_webhook_secrets" (
  "id" UUID NOT NULL,
  "client" VARCHAR(64) NOT NULL,
  "secret" BYTEA NOT NULL,
  "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  CONSTRAINT "client_webhook_secrets_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "client_webhook_secrets_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$')
);
CREATE INDEX "client_webhook_secrets_client_idx" ON "client_webhook_secrets" ("client", "created_at");

-- The timers' relay reads the pending firings due soon in fire-time order.
-- (A firing is told by its timer: the value TIMER cannot be used in the transaction that adds it.)
CREATE INDEX "notifications_timer_due_idx" ON "notifications" ("due_at", "id") WHERE "timer_id" IS NOT NULL AND "status" = 'PENDING';

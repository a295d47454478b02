-- Run-time outbound rate limits (docs/operations.md, Rate limits): set from the
-- admin API, kept here so a restart, or a Redis that lost its copy, keeps them.
CREATE TABLE "queue_rate_limits" (
  -- "<queue>", "<queue>:<job type>" or "endpoint:<key>" (queue/limits/limit-rules.ts).
  "scope"       VARCHAR(260)   NOT NULL,
  "count"       INTEGER        NOT NULL,
  "interval_ms" INTEGER        NOT NULL,
  "changed_at"  TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  CONSTRAINT "queue_rate_limits_pkey" PRIMARY KEY ("scope"),
  CONSTRAINT "queue_rate_limits_count" CHECK ("count" BETWEEN 1 AND 1000000),
  CONSTRAINT "queue_rate_limits_interval" CHECK ("interval_ms" BETWEEN 1 AND 86400000)
);

-- Pause and resume of queues and job types (docs/operations.md, Pausing a queue).
-- The intended state, kept beside Redis: a Redis that lost its pause (a restart
-- without the write) is found by the periodic check and the pause re-applied.
CREATE TABLE "queue_controls" (
  "queue"      VARCHAR(48)  NOT NULL,
  -- '*' for the whole queue, else a job type.
  "type"       VARCHAR(64)  NOT NULL,
  "paused"     BOOLEAN      NOT NULL,
  "changed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  "changed_by" VARCHAR(64)  NOT NULL,
  CONSTRAINT "queue_controls_pkey" PRIMARY KEY ("queue", "type")
);

-- Every operator action on a queue's controls, and every pause the check
-- found lost in Redis and re-applied: who, when, what.
CREATE TABLE "queue_control_audit" (
  "id"     BIGSERIAL    NOT NULL,
  "at"     TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  "actor"  VARCHAR(64)  NOT NULL,
  "queue"  VARCHAR(48)  NOT NULL,
  "type"   VARCHAR(64)  NOT NULL,
  -- PAUSE, RESUME (an operator's), REAPPLY (the check's, after Redis lost a pause or a resume).
  "action" VARCHAR(16)  NOT NULL,
  "reason" VARCHAR(500),
  CONSTRAINT "queue_control_audit_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "queue_control_audit_action" CHECK ("action" IN ('PAUSE', 'RESUME', 'REAPPLY'))
);
CREATE INDEX "queue_control_audit_queue_at_idx" ON "queue_control_audit" ("queue", "at");

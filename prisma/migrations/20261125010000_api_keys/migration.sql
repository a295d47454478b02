-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "name" VARCHAR(64) NOT NULL,
    "scopes" TEXT[],
    "secret_hash" CHAR(64) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- Idempotency keys are stored as "<api key id>:<Idempotency-Key>" (scoped to the client that sent them).
ALTER TABLE "orders" ALTER COLUMN "idempotency_key" SET DATA TYPE VARCHAR(300);
ALTER TABLE "appointments" ALTER COLUMN "idempotency_key" SET DATA TYPE VARCHAR(300);

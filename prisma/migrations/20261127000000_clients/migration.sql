-- Every object belongs to a client (a tenant): the API key that made it
-- names one, and every read and write of the API is filtered by it. Rows made
-- before clients existed belong to 'default', the client of every key made
-- without one, so a single-client deployment sees no change. The column
-- default is that migration's, and stays for the same reason: a key or row
-- that names no client is 'default's.
ALTER TABLE "api_keys" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "orders" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "appointments" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "notifications" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "areas" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "parcels" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE "batches" ADD COLUMN "client" VARCHAR(64) NOT NULL DEFAULT 'default';

-- Idempotency keys are per client now ("<client>/<Idempotency-Key>", up to
-- 64 + 1 + 255), no longer per API key: a client's keys share them, so a retry
-- sent with a rotated key replays instead of creating twice.
ALTER TABLE "orders" ALTER COLUMN "idempotency_key" SET DATA TYPE VARCHAR(320);
ALTER TABLE "appointments" ALTER COLUMN "idempotency_key" SET DATA TYPE VARCHAR(320);
-- The keys made before ("<api key id>:<key>", the id a UUID of 36) take the
-- new form, so a create retried across the upgrade replays instead of
-- creating twice. Where two keys of one client used the same value, the
-- newest row takes it (a retry is of the latest) and the others keep the old
-- form (never looked up again).
UPDATE "orders" o SET "idempotency_key" = o."client" || '/' || substr(o."idempotency_key", 38)
  FROM (SELECT "id", row_number() OVER (PARTITION BY "client", substr("idempotency_key", 38) ORDER BY "created_at" DESC, "id") AS n
          FROM "orders" WHERE "idempotency_key" ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:') k
 WHERE o."id" = k."id" AND k.n = 1;
UPDATE "appointments" a SET "idempotency_key" = a."client" || '/' || substr(a."idempotency_key", 38)
  FROM (SELECT "id", row_number() OVER (PARTITION BY "client", substr("idempotency_key", 38) ORDER BY "created_at" DESC, "id") AS n
          FROM "appointments" WHERE "idempotency_key" ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:') k
 WHERE a."id" = k."id" AND k.n = 1;

-- Area codes and tracking numbers are unique per client: two clients may both
-- have area B7. The keys become (client, code) and (client, tracking_no), and
-- a parcel's or batch's area is its own client's.
ALTER TABLE "parcels" DROP CONSTRAINT "parcels_area_code_fkey";
ALTER TABLE "batches" DROP CONSTRAINT "batches_area_code_fkey";
ALTER TABLE "areas" DROP CONSTRAINT "areas_pkey", ADD CONSTRAINT "areas_pkey" PRIMARY KEY ("client", "code");
ALTER TABLE "parcels" DROP CONSTRAINT "parcels_pkey", ADD CONSTRAINT "parcels_pkey" PRIMARY KEY ("client", "tracking_no");
ALTER TABLE "parcels" ADD CONSTRAINT "parcels_client_area_code_fkey" FOREIGN KEY ("client", "area_code") REFERENCES "areas"("client", "code") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "batches" ADD CONSTRAINT "batches_client_area_code_fkey" FOREIGN KEY ("client", "area_code") REFERENCES "areas"("client", "code") ON DELETE RESTRICT ON UPDATE CASCADE;
DROP INDEX "batches_area_code_created_at_idx";
CREATE INDEX "batches_client_area_code_created_at_idx" ON "batches"("client", "area_code", "created_at");
-- The operators' latest batches of one client.
CREATE INDEX "batches_client_created_at_idx" ON "batches"("client", "created_at");
-- The admin key listing filtered by client.
CREATE INDEX "api_keys_client_idx" ON "api_keys"("client");

-- A client id is what the API accepts (it becomes part of Redis keys, and a
-- '/' in it would make two areas' batcher groups one), whoever writes the
-- row. NOT VALID: the rows before are all 'default', and a check of every
-- existing row would hold each table's lock for a scan.
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "orders" ADD CONSTRAINT "orders_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "appointments" ADD CONSTRAINT "appointments_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "notifications" ADD CONSTRAINT "notifications_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "areas" ADD CONSTRAINT "areas_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "parcels" ADD CONSTRAINT "parcels_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;
ALTER TABLE "batches" ADD CONSTRAINT "batches_client_check" CHECK ("client" ~ '^[A-Za-z0-9_.-]{1,64}$') NOT VALID;

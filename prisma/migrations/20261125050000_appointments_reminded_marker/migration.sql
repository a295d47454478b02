-- The mark of a live reminder: true once the statement writing (or taking
-- back) the reminder of the appointment's current slot committed, false again
-- with any change of the booking. The trigger below unmarks on a change of
-- the slot, the status or updated_at, whichever statement makes it (an older
-- version of the service too), so a mark stands only while the reminder it
-- records is live: a moved slot's reminder is withdrawn, and unmarked with
-- the move. The appointments pass looks for overdue reminders only among
-- BOOKED appointments not marked, through the partial index below, instead of
-- checking every booking inside its lead for its reminder. A mark means a live
-- reminder of the current slot; no mark means nothing (the pass checks the
-- reminder rows). A column of its own (not a comparison of two), so the
-- planner knows how few rows the index holds.
ALTER TABLE "appointments" ADD COLUMN "reminded" BOOLEAN NOT NULL DEFAULT false;

-- Appointments already reminded, among those the pass may still look at (the
-- longest APPOINTMENT_RECONCILE_AFTER_START_SECONDS is 30 days).
UPDATE "appointments" a SET "reminded" = true
 WHERE a."status" = 'BOOKED' AND a."starts_at" > now() - interval '30 days'
   AND EXISTS (SELECT 1 FROM "notifications" n
                WHERE n."dedupe_key" = 'appointment-reminder:' || a."id" || ':' || floor(extract(epoch FROM a."starts_at") * 1000)::bigint
                  AND n."status" <> 'CANCELLED' AND n."withdrawn_at" IS NULL);

CREATE FUNCTION "appointments_unmark_reminded"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."starts_at" IS DISTINCT FROM OLD."starts_at" OR NEW."status" IS DISTINCT FROM OLD."status"
     OR NEW."updated_at" IS DISTINCT FROM OLD."updated_at" THEN
    NEW."reminded" := false;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER "appointments_unmark_reminded" BEFORE UPDATE ON "appointments"
  FOR EACH ROW EXECUTE FUNCTION "appointments_unmark_reminded"();

-- Partial, so not expressible in schema.prisma: kept here. By remind time: the
-- overdue not marked, a few rows whatever the bookings ahead or the history.
CREATE INDEX "appointments_unreminded_idx" ON "appointments"("remind_at") WHERE "status" = 'BOOKED' AND NOT "reminded";

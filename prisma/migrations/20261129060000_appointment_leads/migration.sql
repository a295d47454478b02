-- Several reminder leads per appointment: one reminder per (slot, lead).
--
-- leads: every lead of the booking, longest first (remind_before_seconds is
-- the first); lead_remind_at: each lead's planned time (quiet hours applied),
-- NULL for a lead skipped (its time had passed when it was set while another
-- lead was still ahead). Both NULL for bookings made before: one lead,
-- remind_before_seconds at remind_at. No backfill: the statements read
-- COALESCE(leads, ARRAY[remind_before_seconds]).
ALTER TABLE "appointments" ADD COLUMN "leads" INTEGER[];
ALTER TABLE "appointments" ADD COLUMN "lead_remind_at" TIMESTAMPTZ(3)[];
-- The leads whose live reminder of the current slot is written (the per-lead
-- form of "reminded", which now means every planned lead is); cleared with it.
ALTER TABLE "appointments" ADD COLUMN "reminded_leads" INTEGER[] DEFAULT ARRAY[]::INTEGER[];
-- The lead whose reminder keeps the dedupe key without a lead
-- (appointment-reminder:<id>:<start ms>) and the job id appointment:<id>:remind,
-- as every reminder had before; NULL: remind_before_seconds (pinned by the
-- first change). Other leads' keys and job ids end in :<lead>. With leads NULL
-- (one lead, whose reminder always has the key without a lead): the lead that
-- key's reminder was written for on the current slot (NULL: none yet), which
-- keeps the key if the booking takes a list there.
ALTER TABLE "appointments" ADD COLUMN "key_lead" INTEGER;

-- The mark of live reminders, cleared with any change of the booking (as before), now per lead too.
CREATE OR REPLACE FUNCTION "appointments_unmark_reminded"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."starts_at" IS DISTINCT FROM OLD."starts_at" OR NEW."status" IS DISTINCT FROM OLD."status"
     OR NEW."updated_at" IS DISTINCT FROM OLD."updated_at" THEN
    NEW."reminded" := false;
    NEW."reminded_leads" := ARRAY[]::INTEGER[];
  END IF;
  -- Every lead skipped (a change on the same slot whose leads have all
  -- passed): nothing to remind of, so not left for the pass to read each run.
  IF NEW."lead_remind_at" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM unnest(NEW."lead_remind_at") AS t(at) WHERE t.at IS NOT NULL) THEN
    NEW."reminded" := true;
  END IF;
  RETURN NEW;
END
$$;

-- The time zone an appointment's reminder quiet hours (REMINDER_QUIET_HOURS)
-- are read in, as its booking gave it (an IANA name, as Intl spells it).
-- Nullable: appointments booked before take APPOINTMENT_DEFAULT_TIME_ZONE
-- from the configuration whenever their remind time is planned again (a
-- move), and keep the remind time they have until then. No rewrite of the
-- table: a nullable column without a default is added in place.
ALTER TABLE "appointments" ADD COLUMN "time_zone" VARCHAR(64);

-- Hands a database made by an earlier docker-compose.yml (its objects owned
-- by the superuser the service used to connect as) to the roles of roles.sql:
-- run once, after roles.sql, as that superuser in the service's database
-- (docs/operations.md, "Deployment with Docker Compose"). The owner then owns
-- every table, sequence, enum and function of the public schema, so later
-- migrations may alter them; the app gets rows only, as on a fresh volume.
-- Role names come from the environment (OWNER_ROLE, APP_ROLE).
\set ON_ERROR_STOP on
\set owner `printf %s "$OWNER_ROLE"`
\set app `printf %s "$APP_ROLE"`
SET ots.owner = :'owner';

DO $$
DECLARE
  o text := current_setting('ots.owner');
  r record;
BEGIN
  -- Tables take their indexes and the sequences they own along.
  FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
              AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))
  LOOP
    EXECUTE format('ALTER %s %s OWNER TO %I',
      CASE r.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, r.name, o);
  END LOOP;
  FOR r IN SELECT t.oid::regtype AS name FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = 'public' AND t.typtype = 'e'
  LOOP
    EXECUTE format('ALTER TYPE %s OWNER TO %I', r.name, o);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public'
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.name, o);
  END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO :"app";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO :"app";

-- The service's two roles, made once by the PostgreSQL image's superuser when
-- it initialises an empty data directory (docker-entrypoint-initdb.d), in the
-- database POSTGRES_DB:
--   owner: owns the database and its public schema; the migrate command runs
--          as it (DDL). No superuser, no CREATEDB, no CREATEROLE.
--   app:   the running service; may only read and write rows (SELECT, INSERT,
--          UPDATE, DELETE on the owner's tables, its sequences), so an
--          injected statement could neither change the schema nor leave the
--          database.
-- Names and password files come from the environment (OWNER_ROLE, APP_ROLE,
-- OWNER_PASSWORD_FILE, APP_PASSWORD_FILE), read by psql itself: a password is
-- never on a command line.
\set ON_ERROR_STOP on
\set owner `printf %s "$OWNER_ROLE"`
\set app `printf %s "$APP_ROLE"`
\set owner_password `cat "$OWNER_PASSWORD_FILE"`
\set app_password `cat "$APP_PASSWORD_FILE"`
SELECT current_database() AS db \gset

CREATE ROLE :"owner" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'owner_password';
CREATE ROLE :"app" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_password';

ALTER DATABASE :"db" OWNER TO :"owner";
ALTER SCHEMA public OWNER TO :"owner";
-- Before PostgreSQL 15 every role could create in public; and no other role connects.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"app";
GRANT USAGE ON SCHEMA public TO :"app";

-- What the owner's migrations create from now on, the app may use (rows only).
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO :"app";

// The compose deployment's two database roles (deploy/postgres/roles.sql, run
// here by psql as the image runs it): migrations as the owner, the service as
// a role that may only read and write rows. The service starts, takes an
// order and cancels it at its deadline as that role; a pending migration
// fails as that role with a message saying who must run it. A database an
// earlier compose file made (everything owned by the superuser) is handed to
// the roles by deploy/postgres/adopt.sql.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { MIGRATIONS_DIR, MigrationError, migrate } from '../../../src/core/migrate.js';
import { orderBody } from '../../helpers/bodies.js';
import { adminQuery, createTestDb, type TestDb } from '../../helpers/db.js';
import { makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const log = createLogger('silent');
type Roles = { owner: string; app: string; ownerUrl: string; appUrl: string; drop(): Promise<void> };
const made: Roles[] = [];
let tdb: TestDb;
let roles: Roles;
let svc: TestService | undefined;

/** Runs a deploy/postgres script with psql as the superuser, as the PostgreSQL image runs its init scripts. */
function psqlScript(file: string, url: string, env: Record<string, string>): void {
  const r = spawnSync('psql', ['--no-psqlrc', '-q', '-f', file, url], { env: { ...process.env, ...env }, encoding: 'utf8' });
  expect(r.error ?? r.stderr).toBeFalsy();
  expect(r.status).toBe(0);
}

/** Makes the two roles in the database at `url` with roles.sql (passwords from files, as compose's secrets). */
function makeRoles(url: string): Roles {
  const tag = randomBytes(4).toString('hex');
  const names = { owner: `ots_owner_${tag}`, app: `ots_app_${tag}` };
  const passwords = { owner: randomBytes(12).toString('hex'), app: randomBytes(12).toString('hex') };
  const dir = mkdtempSync(join(tmpdir(), 'ots-roles-'));
  writeFileSync(join(dir, 'owner'), `${passwords.owner}\n`);
  writeFileSync(join(dir, 'app'), passwords.app);
  const env = { OWNER_ROLE: names.owner, APP_ROLE: names.app, OWNER_PASSWORD_FILE: join(dir, 'owner'), APP_PASSWORD_FILE: join(dir, 'app') };
  psqlScript('deploy/postgres/roles.sql', url, env);
  const as = (role: string, password: string) => {
    const u = new URL(url);
    u.username = role;
    u.password = password;
    return u.href;
  };
  const r: Roles = {
    ...names,
    ownerUrl: as(names.owner, passwords.owner),
    appUrl: as(names.app, passwords.app),
    async drop() {
      await adminQuery(`DROP ROLE IF EXISTS "${names.app}"`);
      await adminQuery(`DROP ROLE IF EXISTS "${names.owner}"`);
    },
  };
  made.push(r);
  return r;
}

/** A copy of the migrations with one more, `sql`, named `name`. */
function migrationsWith(sql: string, name = '99990101000000_more'): string {
  const dir = mkdtempSync(join(tmpdir(), 'ots-migrations-'));
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  mkdirSync(join(dir, name));
  writeFileSync(join(dir, name, 'migration.sql'), sql);
  return dir;
}

beforeAll(async () => {
  tdb = await createTestDb('roles', { migrate: false });
  roles = makeRoles(tdb.url);
  await migrate(roles.ownerUrl, log);
});

afterAll(async () => {
  await stopTestService(svc, tdb);
  for (const r of made) await r.drop();
});

describe('the owner and app roles', () => {
  it('runs the service as the app role: rows only', async () => {
    expect(await migrate(roles.appUrl, log)).toEqual([]); // all applied: nothing for it to create
    svc = await startTestService(roles.appUrl, { ORDER_RECONCILE_INTERVAL_SECONDS: '3600' });
    const created = await svc
      .api()
      .post('/orders')
      .send(orderBody({ paymentTimeoutSeconds: 1 }));
    expect(created.status).toBe(201);
    let status = '';
    for (let i = 0; i < 100 && status !== 'CANCELLED'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      status = (await svc.api().get(`/orders/${created.body.id}`)).body.status;
    }
    expect(status).toBe('CANCELLED');
    const listed = await svc.api().get(`/notifications?orderId=${created.body.id}`);
    expect(listed.body.notifications).toHaveLength(1);
  });

  it('refuses the app role a change of the schema, saying who must migrate', async () => {
    const dir = migrationsWith('CREATE TABLE "more" (id int);');
    const err = await migrate(roles.appUrl, log, dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect(String(err)).toMatch(/permission denied for schema public .*run the migrate command as the role owning the schema/);
    expect(await migrate(roles.ownerUrl, log, dir)).toEqual(['99990101000000_more']);
  });

  it('lets no other role in', async () => {
    const rows = await adminQuery<{ ok: boolean }>(`SELECT has_database_privilege('public', '${tdb.name}', 'CONNECT') AS ok`);
    expect(rows[0]!.ok).toBe(false);
  });

  it('adopts a database an earlier compose file made as the superuser', async () => {
    const old = await createTestDb('adopt'); // migrated by the superuser, as the service used to connect
    try {
      const r = makeRoles(old.url);
      psqlScript('deploy/postgres/adopt.sql', old.url, { OWNER_ROLE: r.owner, APP_ROLE: r.app });
      const dir = migrationsWith(
        `ALTER TYPE "NotificationStatus" ADD VALUE 'ADOPTED'; ALTER TABLE "orders" ADD COLUMN "adopted" int;
         CREATE OR REPLACE FUNCTION "appointments_unmark_reminded"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;`,
      );
      expect(await migrate(r.ownerUrl, log, dir)).toEqual(['99990101000000_more']);
      expect((await makeApiKey(r.appUrl)).key).toBeTruthy(); // rows: yes
      await expect(migrate(r.appUrl, log, migrationsWith('CREATE TABLE "x" (id int);', '99990102000000_x'))).rejects.toThrow(/permission denied/); // schema: no
    } finally {
      await old.drop();
    }
  });
});

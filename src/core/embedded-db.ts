// The zero-setup database: PGlite (PostgreSQL compiled to WASM) keeping its
// files under DATA_DIR, served over the Postgres wire protocol so the same pg
// driver and Prisma adapter talk to it unchanged. One connection at a time:
// the pool using it must have size 1.
//
// PGlite's server accepts any user and password as superuser, so nobody but
// this process's user may reach it or its files: the wire protocol goes over a
// unix socket in an owner-only directory (a TCP port, even on 127.0.0.1, is
// open to every local user), and the data directory is 0700 with its files 0600.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { lockDataDir } from './data-dir-lock.js';
import { makePrivate, withPrivateUmask } from './private-files.js';

export { DataDirInUseError } from './data-dir-lock.js';

export type EmbeddedDb = { url: string; dataDir: string; stop(): Promise<void> };

/** Under DATA_DIR: the lock file naming the process that has the database open. */
export const EMBEDDED_DB_LOCK_FILE = 'pglite.pid';
/** Under DATA_DIR: the owner-only directory holding the server's unix socket. */
export const EMBEDDED_DB_SOCKET_DIR = 'pglite-socket';
/** The name pg looks for in a socket directory given as host (for port 5432). */
const SOCKET_FILE = '.s.PGSQL.5432';
/** A unix socket path must fit sun_path: 108 bytes on Linux, 104 on macOS. */
const MAX_SOCKET_PATH = 100;

/** Opens the embedded database under dataDir; throws DataDirInUseError while another process has it open. */
export async function startEmbeddedDb(dataDir: string): Promise<EmbeddedDb> {
  const root = resolve(dataDir);
  mkdirSync(root, { recursive: true, mode: 0o700 });
  const undo: (() => void)[] = [lockDataDir(join(root, EMBEDDED_DB_LOCK_FILE))];
  try {
    const dir = join(root, 'pglite');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    makePrivate(dir); // files an earlier version left world-writable
    const socketDir = privateSocketDir(root, undo);
    const db = await withPrivateUmask(() => PGlite.create(dir)); // the directories a first start makes
    makePrivate(dir); // what its initdb image wrote 0666 on a first start
    const server = new PGLiteSocketServer({ db, path: join(socketDir, SOCKET_FILE), maxConnections: 1 });
    try {
      await server.start();
    } catch (err) {
      await db.close();
      throw err;
    }
    return {
      url: `postgresql://postgres:postgres@localhost/postgres?host=${encodeURIComponent(socketDir)}&sslmode=disable`,
      dataDir: dir,
      async stop() {
        try {
          await server.stop();
          await db.close();
          makePrivate(dir); // files rewritten with PGlite's own modes while it ran (pg_internal.init)
        } finally {
          for (const u of undo.reverse()) u();
        }
      },
    };
  } catch (err) {
    for (const u of undo.reverse()) u();
    throw err;
  }
}

/** An owner-only directory for the socket, without a socket a dead process left; its removal goes on `undo` if it is temporary. */
function privateSocketDir(root: string, undo: (() => void)[]): string {
  let dir = join(root, EMBEDDED_DB_SOCKET_DIR);
  if (join(dir, SOCKET_FILE).length > MAX_SOCKET_PATH) {
    const made = mkdtempSync(join(tmpdir(), 'ots-pglite-')); // 0700, and short
    undo.push(() => rmSync(made, { recursive: true, force: true }));
    dir = made;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  makePrivate(dir);
  rmSync(join(dir, SOCKET_FILE), { force: true }); // safe: the caller holds the lock
  return dir;
}

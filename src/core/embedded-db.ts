// The zero-setup database: PGlite (PostgreSQL compiled to WASM) keeping its
// files under DATA_DIR, served over the Postgres wire protocol on a local port
// so the same pg driver and Prisma adapter talk to it unchanged. One
// connection at a time: the pool using it must have size 1.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { freePort } from './free-port.js';

export type EmbeddedDb = { url: string; dataDir: string; stop(): Promise<void> };

export async function startEmbeddedDb(dataDir: string, port = 0): Promise<EmbeddedDb> {
  const dir = resolve(join(dataDir, 'pglite'));
  mkdirSync(dir, { recursive: true });
  const db = await PGlite.create(dir);
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: port || (await freePort()), maxConnections: 1 });
  await server.start();
  const conn = server.getServerConn(); // "127.0.0.1:port"
  return {
    url: `postgresql://postgres:postgres@${conn}/postgres?sslmode=disable`,
    dataDir: dir,
    async stop() {
      await server.stop();
      await db.close();
    },
  };
}

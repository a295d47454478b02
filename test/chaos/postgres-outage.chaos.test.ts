// PostgreSQL unavailable mid-load. The service reaches the scenario's database
// through a TCP proxy (the shared cluster is never stopped): first the proxy
// resets every connection and refuses new ones for 4 s, later the service's
// own backends of that database are ended with pg_terminate_backend. While the
// database is away the API answers 503 application/problem+json
// DATABASE_UNAVAILABLE (clients retry), job handlers fail and are retried, and
// nothing may be marked done that was not. The domain reconciliation passes are
// off (one pass at start), so the end state must come from the handlers'
// retries alone; the notification relay stays on (the designed repair of a
// committed row whose hand-over to delivery was cut off).
import { bearer } from '../helpers/service.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminQuery } from '../helpers/db.js';
import { REDIS_URL, sleep } from '../helpers/redis.js';
import { type TcpProxy, startTcpProxy } from '../helpers/tcp-proxy.js';
import { NO_DOMAIN_RECONCILE, type Scenario, startScenario } from './scenario.js';

const APP = 'ots-chaos-pg';
const CUT_MS = 4_000;
let proxy: TcpProxy;
let s: Scenario;

beforeAll(async () => {
  proxy = await startTcpProxy({ port: 5432 });
  s = await startScenario({
    name: 'postgres-outage',
    workers: 2,
    redisUrl: REDIS_URL,
    serviceDatabaseUrl: (url) => {
      const u = new URL(url);
      u.port = String(proxy.port);
      u.searchParams.set('application_name', APP);
      return u.toString();
    },
    env: { ...NO_DOMAIN_RECONCILE, PARCEL_RECONCILE_INTERVAL_SECONDS: '3600' },
  });
});
afterAll(async () => {
  await s?.close();
  await proxy?.close();
});

type Answer = { status: number; type: string | null; code: unknown; detail?: unknown };

async function probe(path: string, init?: RequestInit): Promise<Answer> {
  const res = await fetch(`${s.url}${path}`, { ...init, headers: { 'content-type': 'application/json', ...bearer(s.key) } });
  const body = (await res.json()) as { code?: unknown; detail?: unknown };
  return { status: res.status, type: res.headers.get('content-type'), code: body.code, detail: body.detail };
}

/** Ends the service's connections to the scenario's database (only those: by database and application name). */
async function terminateBackends(): Promise<number> {
  const before = await s.tdb.db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
    APP,
  );
  await adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${s.tdb.name}' AND application_name = '${APP}'`);
  return before[0]?.n ?? 0;
}

describe('PostgreSQL unavailable mid-load', () => {
  it('answers 503 problem+json, retries the work and ends with every invariant', async () => {
    const faults: Record<string, unknown> = {};
    const chaos = async () => {
      await sleep(5_000);
      faults.connectionsReset = proxy.dropAll();
      const refusing = proxy.refuse(CUT_MS);
      await sleep(500);
      faults.duringCut = {
        readyz: await probe('/readyz'),
        createOrder: await probe('/orders', {
          method: 'POST',
          body: JSON.stringify({ customerId: 'probe', items: [{ sku: 'P', quantity: 1, unitPriceCents: 1 }] }),
        }),
      };
      await refusing;
      faults.backAt = [{ fault: 'postgres refused', at: Date.now() }];
      await sleep(4_000);
      faults.backendsTerminated = await terminateBackends();
    };
    const { records } = await s.drive(chaos);
    const evidence = await s.settleAndCheck(records, faults);

    const cut = faults.duringCut as { readyz: Answer; createOrder: Answer };
    expect(cut.readyz).toMatchObject({ status: 503, code: 'NOT_READY', detail: 'postgres' });
    expect(cut.createOrder).toMatchObject({ status: 503, code: 'DATABASE_UNAVAILABLE' });
    expect(cut.createOrder.type).toMatch(/^application\/problem\+json/);
    // The clients met the outage, and every 503 they got was a problem+json DATABASE_UNAVAILABLE.
    expect(s.http.tally.unavailable.DATABASE_UNAVAILABLE ?? 0).toBeGreaterThan(0);
    expect(Object.keys(s.http.tally.unavailable)).toEqual(['DATABASE_UNAVAILABLE']);
    // The workers met it too: handlers failed and were retried, flush commits were put back.
    const retried = (evidence.logged['job failed; retry scheduled'] ?? 0) + (evidence.logged['batch commit failed; putting the batches back'] ?? 0);
    expect(retried).toBeGreaterThan(0);
    expect(faults.backendsTerminated).toBeGreaterThan(0);
  });
});

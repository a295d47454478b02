// Redis Sentinel availability (npm run test:sentinel): the service on a private
// master, replica and three sentinels (test/helpers/redis-sentinel.ts). Under
// order load the master is failed over (SENTINEL FAILOVER), then the new one
// is killed (SIGKILL): whatever Redis lost, PostgreSQL's orders all end as
// their clients were told, each cancellation notified once and delivered.
// Then, on the engine alone, a real rollback: a claim the promoted replica
// never received, and the token it handed out fences nothing after it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisClient, createRedis, whenReady } from '../../src/core/redis.js';
import { expireJobId } from '../../src/modules/orders/orders.service.js';
import { createQueue } from '../../src/queue/producer/queue.js';
import { NackCode, runAck, runClaim, runNack } from '../../src/queue/scripts/scripts.js';
import type { ShardKeys } from '../../src/queue/keys.js';
import { type TestDb, createTestDb } from '../helpers/db.js';
import { REDIS_URL, sleep, uniqueQueueName, waitFor } from '../helpers/redis.js';
import { type SentinelSet, type Switch, startSentinelSet } from '../helpers/redis-sentinel.js';
import { type TestService, bearer, startTestService } from '../helpers/service.js';
import { type Webhook, startWebhook } from '../helpers/webhook.js';

// Short timings, so what a failover loses is repaired within seconds.
const SERVICE_ENV: Record<string, string> = {
  ORDER_RECONCILE_INTERVAL_SECONDS: '1',
  ORDER_RECONCILE_GRACE_SECONDS: '1',
  WORKER_LEASE_MS: '1500',
  WORKER_IDLE_RECHECK_MS: '500',
  NOTIFY_TIMEOUT_MS: '500',
  // A delivery job Redis lost is handed over again by the relay (rows older than 5 s).
  NOTIFY_RELAY_INTERVAL_SECONDS: '1',
  NOTIFY_RETRY_DELAYS_MS: '250,500,1000',
  NOTIFY_MAX_ATTEMPTS: '50', // outlasts both outages
  SHUTDOWN_GRACE_MS: '2000',
  // REDIS_URL (from REDIS_ENV) stays: with sentinels it only lends credentials.
  REDIS_CLUSTER_NODES: '', // empty is unset: never both, even under TEST_REDIS_CLUSTER_NODES
};

const ORDERS_MIN = 200;
const LANES = 2;
const LANE_CYCLE_MS = 200; // two lanes: about 10 orders a second
const FIRST_FAULT_AFTER_MS = 2_000;
const TAIL_MS = 3_000; // load after the last promotion, to see the service recover
const HTTP_RETRY_FOR_MS = 10_000;
// A request overlapping a fault's window (fault to recovery, plus the 1 s
// bound on each of a request's Redis calls) may be answered 503.
const WINDOW_SLACK_MS = 2_000;
const SETTLE_TIMEOUT_MS = 60_000;

type Call = { what: string; status: number; code: string | undefined; sentAt: number; answeredAt: number };
type Placed = {
  id: string;
  sentAt: number;
  answeredAt: number;
  paid: boolean;
  /** Whether the expiry job was in the master the sentinels named right after the 201, and which one that was. */
  job: { state: 'present' | 'absent' | 'unknown'; on: number };
};
type Fault = Switch & { kind: string; at: number; recoveryMs: number | null };

/** An HTTP client that records every answer and retries 503s and broken connections (same Idempotency-Key). */
function httpClient(base: string, key: string) {
  const calls: Call[] = [];
  async function once(method: string, path: string, body: unknown, headers: Record<string, string>) {
    const sentAt = Date.now();
    let status = 0;
    let json: Record<string, unknown> = {};
    try {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...bearer(key), ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      status = res.status;
      const text = await res.text();
      json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      // status 0: no answer
    }
    calls.push({ what: `${method} ${path}`, status, code: json.code as string | undefined, sentAt, answeredAt: Date.now() });
    return { status, json };
  }
  async function send(method: string, path: string, body: unknown, headers: Record<string, string> = {}) {
    const first = Date.now();
    for (;;) {
      const r = await once(method, path, body, headers);
      if ((r.status !== 503 && r.status !== 0) || Date.now() - first > HTTP_RETRY_FOR_MS) return r;
      await sleep(200);
    }
  }
  return { calls, send };
}
type Http = ReturnType<typeof httpClient>;

/** Where the expiry job of a just created order is: looked up on the master the sentinels name now. */
async function jobAtCreate(set: SentinelSet, jobs: string, orderId: string): Promise<Placed['job']> {
  let on = 0;
  for (let i = 0; i < 3; i++) {
    try {
      on = await set.namedMaster();
      return { state: (await set.node(on).hexists(jobs, expireJobId(orderId))) ? 'present' : 'absent', on };
    } catch {
      await sleep(100);
    }
  }
  return { state: 'unknown', on };
}

/** One client: creates an order, looks for its expiry job, pays every other one at once; until `done()`. */
async function lane(n: number, http: Http, set: SentinelSet, jobs: string, placed: Placed[], done: () => boolean): Promise<void> {
  for (let i = 0; !done(); i++) {
    const started = Date.now();
    const body = { customerId: `c-${n}-${i}`, items: [{ sku: 'SKU-1', quantity: 1, unitPriceCents: 990 }], paymentTimeoutSeconds: 1 + (i % 2) };
    const r = await http.send('POST', '/orders', body, { 'idempotency-key': `sentinel-${n}-${i}` });
    if (r.status !== 201) throw new Error(`create answered ${r.status} ${JSON.stringify(r.json)}`);
    const p: Placed = { id: String(r.json.id), sentAt: started, answeredAt: Date.now(), paid: false, job: await jobAtCreate(set, jobs, String(r.json.id)) };
    placed.push(p);
    // Two paid, two not: both payment windows (1 s, 2 s) on both sides.
    if (Math.floor(i / 2) % 2 === 0) p.paid = (await http.send('POST', `/orders/${p.id}/pay`, {})).status === 200;
    await sleep(Math.max(0, LANE_CYCLE_MS - (Date.now() - started)));
  }
}

/** The first create sent after the fault whose job reached the node promoted by it. */
function recoveryOf(f: Fault, placed: readonly Placed[]): number | null {
  const ok = placed.filter((p) => p.sentAt >= f.at && p.job.state === 'present' && p.job.on === f.to);
  return ok.length ? Math.min(...ok.map((p) => p.answeredAt)) - f.at : null;
}

async function inject(kind: string, fault: () => Promise<Switch>): Promise<Fault> {
  const at = Date.now();
  return { kind, at, ...(await fault()), recoveryMs: null };
}

/** A SENTINEL FAILOVER, then a SIGKILL of the master it made; each pushed to `faults` once the sentinels agree. */
async function injectFaults(set: SentinelSet, faults: Fault[]): Promise<void> {
  await sleep(FIRST_FAULT_AFTER_MS);
  faults.push(await inject('SENTINEL FAILOVER', () => set.failover()));
  // The old master turns replica about 10 s after the switch: then there is one to promote.
  await set.waitHealthy();
  faults.push(await inject('SIGKILL master', () => set.killMaster()));
}

/** Until no order is UNPAID and every cancellation notification is SENT and received. */
async function settle(tdb: TestDb, webhook: Webhook): Promise<{ settled: boolean; ms: number }> {
  const t0 = Date.now();
  const settled = await waitFor(
    async () => {
      if ((await tdb.db.order.count({ where: { status: 'UNPAID' } })) > 0) return false;
      const notes = await tdb.db.notification.findMany({ where: { kind: 'ORDER_CANCELLED' }, select: { id: true, status: true } });
      const got = new Set(webhook.calls.map((c) => c.body.id));
      return notes.every((n) => n.status === 'SENT' && got.has(n.id));
    },
    SETTLE_TIMEOUT_MS,
    250,
  );
  return { settled, ms: Date.now() - t0 };
}

/** Everything the orders must satisfy once settled, as lists of offending examples. */
async function checkOrders(tdb: TestDb, placed: readonly Placed[], webhook: Webhook) {
  const rows = await tdb.db.order.findMany({ select: { id: true, status: true, expiresAt: true, cancelledAt: true, cancelReason: true } });
  const notes = await tdb.db.notification.findMany({ where: { kind: 'ORDER_CANCELLED' }, select: { id: true, orderId: true, status: true } });
  const received = new Map<string, number>();
  for (const c of webhook.calls) received.set(c.body.id, (received.get(c.body.id) ?? 0) + 1);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const notesOf = (id: string) => notes.filter((n) => n.orderId === id);
  const known = new Set(placed.map((p) => p.id));
  const p = {
    paidNotPaid: placed.filter((o) => o.paid && byId.get(o.id)?.status !== 'PAID').map((o) => `${o.id}: ${byId.get(o.id)?.status}`),
    unpaidNotTimedOut: placed
      .filter((o) => !o.paid)
      .map((o) => ({ id: o.id, r: byId.get(o.id) }))
      .filter(({ r }) => r?.status !== 'CANCELLED' || r.cancelReason !== 'PAYMENT_TIMEOUT' || (r.cancelledAt?.getTime() ?? 0) < r.expiresAt.getTime())
      .map(({ id, r }) => `${id}: ${r ? `${r.status} ${r.cancelReason} at ${r.cancelledAt?.toISOString()}` : 'missing'}`),
    notificationsNotOne: rows
      .filter((r) => notesOf(r.id).length !== (r.status === 'CANCELLED' ? 1 : 0))
      .map((r) => `${r.id} ${r.status}: ${notesOf(r.id).length}`),
    notDelivered: notes.filter((n) => n.status !== 'SENT' || !received.get(n.id)).map((n) => `${n.id}: ${n.status}, received ${received.get(n.id) ?? 0}`),
    unknownOrders: rows.filter((r) => !known.has(r.id)).map((r) => r.id),
  };
  const cancelled = rows.filter((r) => r.status === 'CANCELLED');
  const lateness = cancelled.map((r) => (r.cancelledAt as Date).getTime() - r.expiresAt.getTime());
  const duplicates = [...received].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
  const paid = rows.filter((r) => r.status === 'PAID').length;
  return { problems: p, paid, cancelled: cancelled.length, maxLatenessMs: Math.max(0, ...lateness), duplicates };
}

/** 5xx other than 503, and 503s whose request did not overlap a fault's window. */
function checkAnswers(calls: readonly Call[], faults: readonly Fault[]) {
  const windows = faults.map((f) => ({ from: f.at, to: f.at + Math.max(f.ms, f.recoveryMs ?? 0) + WINDOW_SLACK_MS }));
  const inWindow = (c: Call) => windows.some((w) => c.sentAt <= w.to && c.answeredAt >= w.from);
  const fmt = (c: Call) => `${c.what}: ${c.status} ${c.code} at +${c.sentAt - (faults[0]?.at ?? 0)} ms`;
  return {
    serverErrors: calls.filter((c) => c.status >= 500 && c.status !== 503).map(fmt),
    unavailableOutsideFaults: calls.filter((c) => c.status === 503 && !inWindow(c)).map(fmt),
    noAnswer: calls.filter((c) => c.status === 0).map(fmt),
  };
}

describe('service on Redis Sentinel under order load', () => {
  let set: SentinelSet;
  let tdb: TestDb;
  let webhook: Webhook;
  let svc: TestService;

  beforeAll(async () => {
    set = await startSentinelSet('ots-load');
    tdb = await createTestDb('sentinel');
    webhook = await startWebhook();
    svc = await startTestService(tdb.url, {
      ...SERVICE_ENV,
      REDIS_SENTINELS: set.sentinelsEnv,
      REDIS_SENTINEL_NAME: set.name,
      NOTIFY_WEBHOOK_URL: webhook.url,
    });
  });
  afterAll(async () => {
    await svc?.stop();
    await webhook?.close();
    await tdb?.drop();
    await set?.stop();
  });

  it('SENTINEL FAILOVER, then SIGKILL of the new master: nothing lost, nothing twice', async () => {
    const started = Date.now();
    const http = httpClient(svc.url, svc.key);
    const orders = svc.modules.find((m) => m.name === 'orders');
    if (!orders) throw new Error('no orders module');
    const jobs = (orders.queue.keys[0] as ShardKeys).jobs;
    const placed: Placed[] = [];
    const faults: Fault[] = [];
    let faultsOver = false;
    const done = () => faultsOver && placed.length >= ORDERS_MIN && Date.now() > (faults.at(-1)?.at ?? 0) + (faults.at(-1)?.ms ?? 0) + TAIL_MS;

    let halted = false; // a fault or a lane that fails stops the others
    const halt = (err: unknown): never => {
      halted = true;
      throw err;
    };
    const chaos = injectFaults(set, faults)
      .catch(halt)
      .finally(() => (faultsOver = true));
    const load = Promise.all(Array.from({ length: LANES }, (_, n) => lane(n, http, set, jobs, placed, () => halted || done()).catch(halt)));
    const [l, c] = await Promise.allSettled([load, chaos]);
    if (c.status === 'rejected') throw c.reason;
    if (l.status === 'rejected') throw l.reason;
    for (const f of faults) f.recoveryMs = recoveryOf(f, placed);

    const s = await settle(tdb, webhook);
    const o = await checkOrders(tdb, placed, webhook);
    const answers = checkAnswers(http.calls, faults);
    console.log(
      JSON.stringify({
        test: 'sentinel-under-load',
        ms: Date.now() - started,
        orders: placed.length,
        paid: o.paid,
        cancelled: o.cancelled,
        failovers: faults.map((f) => ({ kind: f.kind, atMs: f.at - started, from: f.from, to: f.to, promotionMs: f.ms, recoveryMs: f.recoveryMs })),
        maxCancelLatenessMs: o.maxLatenessMs,
        jobsAtCreate: count(placed.map((p) => p.job.state)),
        http: count(http.calls.map((c) => String(c.status))),
        webhook: { received: webhook.calls.length, duplicates: o.duplicates.length },
        settleMs: s.ms,
      }),
    );
    if (o.duplicates.length) console.log(`deliveries received more than once (same notification id): ${o.duplicates.join(', ')}`);

    expect(s.settled, `not settled within ${SETTLE_TIMEOUT_MS} ms`).toBe(true);
    expect(faults.map((f) => f.kind)).toEqual(['SENTINEL FAILOVER', 'SIGKILL master']);
    expect(o.problems).toEqual({ paidNotPaid: [], unpaidNotTimedOut: [], notificationsNotOne: [], notDelivered: [], unknownOrders: [] });
    expect(answers).toEqual({ serverErrors: [], unavailableOutsideFaults: [], noAnswer: [] });
    // The load reached both outcomes, and ran through both outages and after them.
    expect(o.paid).toBeGreaterThan(0);
    expect(o.cancelled).toBeGreaterThan(0);
    for (const f of faults) expect(placed.filter((p) => p.sentAt >= f.at && p.sentAt <= f.at + f.ms).length, `creates during ${f.kind}`).toBeGreaterThan(0);
    expect(placed.filter((p) => p.sentAt > (faults[1]?.at ?? Infinity) + (faults[1]?.ms ?? 0)).length).toBeGreaterThan(0);
  });
});

const count = (xs: readonly string[]) => xs.reduce<Record<string, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

/** Retries `call` until it resolves (a client finding the new master), for at most `ms`. */
async function retrying<T>(call: () => Promise<T>, what: string, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (Date.now() > end) throw new Error(`${what}: still failing after ${ms} ms: ${(err as Error).message}`);
      await sleep(100);
    }
  }
}

async function claimToken(redis: RedisClient, k: ShardKeys): Promise<number> {
  const r = await runClaim(redis, k, 1, 60_000, 10);
  if (r.jobs.length !== 1) throw new Error(`claimed ${r.jobs.length} jobs`);
  return Number((r.jobs[0] as { record: string }).record.split(',')[0]);
}

describe('fencing tokens across a Sentinel rollback', () => {
  let set: SentinelSet;
  let redis: RedisClient;

  beforeAll(async () => {
    set = await startSentinelSet('ots-fence');
    redis = createRedis({ url: REDIS_URL, sentinels: set.sentinels, sentinelName: set.name }, 'sentinel-fencing-test');
    await whenReady(redis, 10_000);
  });
  afterAll(async () => {
    redis?.disconnect();
    await set?.stop();
  });

  it('a token handed out by a master that died unreplicated fences nothing on the promoted replica', async () => {
    const q = createQueue(redis, { name: uniqueQueueName('sentinel-fence'), types: { t: {} } });
    const k = q.keys[0] as ShardKeys;
    // A delivery done before, so the shard's seq holds a token too.
    await q.schedule({ id: 'w', type: 't', delayMs: 0 });
    expect(await runAck(redis, k, [{ id: 'w', token: await claimToken(redis, k) }])).toEqual({ acked: 1, stale: [] });
    await q.schedule({ id: 'x', type: 't', delayMs: 0 });
    await set.waitReplicated(); // the replica holds X, pending
    const seqBefore = await redis.get(k.seq);
    const replica = set.replicas()[0] as number;

    // The claim must not reach the replica. Stopping it is not enough: the
    // master's writes would wait in its socket buffer and be applied once it
    // runs again. So its link is cut while it is stopped (it cannot reconnect
    // and sync the backlog), and it runs again only once the master is dead.
    // Stopped for milliseconds, far below down-after-milliseconds (1 s), so
    // the sentinels still hold it a good replica to promote.
    const pausedAt = Date.now();
    let pausedMs = 0;
    const resume = () => {
      set.resume(replica);
      pausedMs = Date.now() - pausedAt;
    };
    set.pause(replica);
    let tokenA: number;
    try {
      await set.node(set.master()).call('CLIENT', 'KILL', 'TYPE', 'replica');
      tokenA = await claimToken(redis, k);
    } catch (err) {
      resume();
      throw err;
    }
    const sw = await set.killMaster({ onKilled: resume });
    expect(sw.to).toBe(replica);

    // The rollback is real: the new master has X pending, never claimed, and the seq from before the claim.
    expect(await retrying(() => q.get('x'), 'read X on the new master')).toMatchObject({ state: 'pending', attempts: 0 });
    // The seq is back to before claim A too: a counter alone would hand out token A again.
    const seqAfter = await redis.get(k.seq);
    expect(seqAfter).not.toBeNull();
    expect(seqAfter).toBe(seqBefore);

    const tokenB = await retrying(() => claimToken(redis, k), 'claim X on the new master');
    console.log(
      JSON.stringify({ test: 'sentinel-token-fencing', replicaPausedMs: pausedMs, promotionMs: sw.ms, seqAfterRollback: Number(seqAfter), tokenA, tokenB }),
    );
    expect(tokenB).not.toBe(tokenA);
    expect((await runNack(redis, k, 'x', tokenA, 'dead', 0, 'worker of the lost claim')).code).toBe(NackCode.STALE);
    expect(await q.get('x')).toMatchObject({ state: 'in_flight', attempts: 1 });
    expect(await runAck(redis, k, [{ id: 'x', token: tokenB }])).toEqual({ acked: 1, stale: [] });
    expect(await q.get('x')).toBeNull();
  });
});

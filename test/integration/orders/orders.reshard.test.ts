// The orders queue resharded 1 -> 4 -> 2 by the operator's command (npm run
// reshard) while the whole service runs and orders expire through both moves:
// every unpaid order is cancelled once, with one notification; a paid one
// stays paid. On the cluster suite the command moves jobs by copy, remove and
// settle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reshardCommand } from '../../../src/cli/reshard.js';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/core/logger.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { REDIS_ENV, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

describe('orders expiring while their queue is resharded', () => {
  let tdb: TestDb;
  let svc: TestService;
  beforeAll(async () => {
    tdb = await createTestDb('orders_reshard');
    svc = await startTestService(tdb.url, { ORDER_RECONCILE_INTERVAL_SECONDS: '3600', QUEUE_SHARDS: '1' });
  });
  afterAll(async () => {
    await stopTestService(svc, tdb);
  });

  it('cancels each unpaid order once and no paid one', async () => {
    const body = (s: number) => ({ customerId: 'c', items: [{ sku: 's', quantity: 1, unitPriceCents: 100 }], paymentTimeoutSeconds: s });
    // Expiries due before, during and after the moves (each takes about 5 s).
    const created = await Promise.all(
      Array.from({ length: 126 }, (_, i) =>
        svc
          .api()
          .post('/orders')
          .send(body(2 + (i % 14))),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(Array(126).fill(201));
    const ids = created.map((r) => r.body.id as string);
    // Paid ones have 9 s or more: paid in time while the first move runs.
    const paid = ids.filter((_, i) => i % 14 >= 7 && i % 3 === 0);
    const config = loadConfig({ ...REDIS_ENV, DATABASE_URL: tdb.url, QUEUE_PREFIX: svc.prefix, QUEUE_SHARDS: '1', LOG_LEVEL: 'silent' });
    const printed: string[] = [];
    const command = (to: number) => reshardCommand(config, ['--queue', 'orders', '--to', String(to)], createLogger('silent'), (line) => printed.push(line));
    const moving = (async () => [await command(4), await command(2)])();
    // Paid while the move runs: the pay cancels the expiry job wherever it is.
    for (const id of paid)
      expect(
        (
          await svc
            .api()
            .post(`/orders/${id}/pay`)
            .send({ paymentRef: `p-${id}` })
        ).status,
      ).toBe(200);
    expect(await moving).toEqual([0, 0]);
    expect(printed).toEqual([expect.stringMatching(/^orders: 1 -> 4 shards; \d+ jobs moved/), expect.stringMatching(/^orders: 4 -> 2 shards; \d+ jobs moved/)]);
    const unpaid = ids.filter((id) => !paid.includes(id));
    const cancelled = () => tdb.db.order.count({ where: { id: { in: unpaid }, status: 'CANCELLED' } });
    expect(await waitFor(async () => (await cancelled()) === unpaid.length, 30_000, 100)).toBe(true);
    expect(await tdb.db.order.count({ where: { id: { in: paid }, status: 'PAID' } })).toBe(paid.length);
    const notes = await tdb.db.notification.groupBy({ by: ['orderId'], where: { orderId: { in: unpaid } }, _count: true });
    expect(notes).toHaveLength(unpaid.length);
    expect(notes.every((n) => n._count === 1)).toBe(true);
  }, 90_000);
});

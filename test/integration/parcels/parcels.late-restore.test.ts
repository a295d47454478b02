// A put back into a group that takes a full batch (a move into a group it
// fills, a commit's leftovers, the reconciliation pass) whose answer comes
// after the caller stopped waiting: Redis has taken the batch out, so it must
// be committed when the answer comes (as an intake's late add is), not left
// in neither Redis nor a batch until the next reconciliation pass.
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_URL, sleep } from '../../helpers/redis.js';
import { startTcpProxy } from '../../helpers/tcp-proxy.js';
import { useParcelsService } from './parcels.harness.js';

// The service reaches Redis through a proxy that can hold its answers back; the test reads Redis directly.
const proxy = await startTcpProxy({ port: Number(new URL(REDIS_URL).port || 6379) });
afterAll(() => proxy.close());
const h = useParcelsService(
  'parcels_review_late',
  { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600', REDIS_URL: `redis://127.0.0.1:${proxy.port}` },
  'api',
);

describe('a move into a group it fills, answered late by Redis', () => {
  it('commits the batch Redis took (or the parcels wait in the group again)', async () => {
    await h.area('LT-A');
    await h.area('LT-B', { batchSize: 2 });
    await h.post('LTB-1', 'LT-B').expect(202);
    await h.post('LTA-1', 'LT-A').expect(202);
    // Redis runs every call at once; its answers come 1.5 s later (past the 1 s a call is waited for).
    proxy.delay(1_500, 'answers');
    const res = await h.move('LTA-1', { area: 'LT-B' });
    proxy.delay(0);
    console.log('move answered', res.status, res.body.status ?? res.body.code);
    await sleep(3_000);
    const state = async (t: string) => ({
      status: (await h.row(t)).status,
      inA: await h.inGroup('LT-A', t),
      inB: await h.inGroup('LT-B', t),
    });
    const s = { 'LTB-1': await state('LTB-1'), 'LTA-1': await state('LTA-1') };
    console.log('3 s later:', s);
    for (const t of ['LTB-1', 'LTA-1'] as const) {
      const p = s[t];
      expect(p.status === 'BATCHED' || p.inB, `${t}: neither batched nor waiting in its group (${JSON.stringify(p)})`).toBe(true);
    }
  });
});

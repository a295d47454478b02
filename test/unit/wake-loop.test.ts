// A loop step that throws no longer ends its loop (review 2026-11-23, F6): the
// error goes to the loop's onError and the step runs again shortly. Before the
// fix the rejection escaped the loop unhandled, which ends a Node process, and
// the loop (a shard's claims) never ran again.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createWakeLoop } from '../../src/queue/wake/wake-loop.js';
import { waitFor } from '../helpers/redis.js';

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => void unhandled.push(reason);
beforeAll(() => void process.on('unhandledRejection', onUnhandled));
afterAll(() => void process.off('unhandledRejection', onUnhandled));
beforeEach(() => void (unhandled.length = 0));

describe('wake loop', () => {
  it('reports a throwing step and runs it again', async () => {
    const boom = new Error('corrupt job record: 1,1,0,x,t,null');
    let calls = 0;
    const errors: unknown[] = [];
    const loop = createWakeLoop(
      async () => {
        calls++;
        if (calls <= 2) throw boom;
        return 'wait';
      },
      (err) => errors.push(err),
    );
    loop.wakeNow();
    expect(await waitFor(() => calls === 3, 5_000), `step ran ${calls} times; unhandled: ${unhandled.map(String).join('; ')}`).toBe(true);
    await loop.stop();
    expect(errors).toEqual([boom, boom]);
    expect(unhandled).toEqual([]);
  });

  it('keeps going when the error reporter throws too', async () => {
    let calls = 0;
    const loop = createWakeLoop(
      async () => {
        if (++calls === 1) throw new Error('step failed');
        return 'wait';
      },
      () => {
        throw new Error('logger failed');
      },
    );
    loop.wakeNow();
    expect(await waitFor(() => calls === 2, 5_000), `step ran ${calls} times; unhandled: ${unhandled.map(String).join('; ')}`).toBe(true);
    await loop.stop();
    expect(unhandled).toEqual([]);
  });
});

// Model-based suite of the timers: either of two clients PUTs timers of a
// few keys in each mode (replace, keep, debounce with its maximum wait, fire
// times as a delay or an instant, some with few attempts), changes a timer's
// fire time earlier or later, keeps one that exists, cancels, sends batches
// (keys that exist and new ones), reads and lists its timers, an operator
// sets or removes a rate limit (the queue's, the webhook type's or the
// receiver's endpoint's: firings over it wait their turn), and the other
// client reads and cancels a key only the first has; aimed steps send a
// change or cancel while a timer's call runs (the receiver slow, hung,
// failing or refusing), debounce bursts of several calls, and move a timer
// later while Redis loses the move's delivery job (its Redis connections
// silenced, or a restart losing its last second: the old job comes first).
// The receiver answers at random and faults strike (the runner's). The rules
// checked, at each answer:
// - each answer agrees with the model: a new key 201; replace 200 moving a
//   pending firing (the same one), 201 once it is done, 409
//   TIMER_DELIVERING while its call runs (nothing changed); keep 200 with the
//   timer as it was; debounce 200 pushing a pending firing, 201 a new burst,
//   never past its first call + maxWaitMs, the burst's cap never moved; a
//   fire time between the request's send and answer plus its delay; a cancel
//   200 CANCELLED, or 409 TIMER_DELIVERING / TIMER_DELIVERED with nothing
//   changed; reads and lists as the model has them; the other client's read
//   and cancel as for a key nothing has;
// and once settled (test/model/timers/firing-checks.ts):
// - the record, the receiver and the model agree: a firing DELIVERED had a
//   call answered 2xx under its id (webhook-id) with its key and fire time,
//   the last of them its last attempt; one not taken is never DELIVERED;
// - no call before the fire time its body (an answer's) gives;
// - after a change answered 200, the old version is never called; after a
//   cancel answered 200, no call of that firing, and it ends CANCELLED; a
//   firing a replace found done (201) is not called after; one a later
//   firing replaced (201) is called at most by the call then running, and
//   ends DELIVERED, CANCELLED or refused (a timer has one live firing);
// - a firing is delivered to effect at most once: a repeat (same id) only
//   after a success a fault cut off or the service took for a timeout;
// - FAILED only after its attempts or a refusal (never called again), every
//   recorded attempt a call (each excuse narrow, logged and counted).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Step, receivers, runSuite } from './runner.js';
import { MODEL_CLIENTS, type ModelClient, RECEIVER_KINDS, type World, startWorld } from './world.js';
import { type Model, KEY_POOL, MODES, newModel } from './timers/model.js';
import { type Ask, Batch, Change, DebounceBurst, Keep, Put } from './timers/put.steps.js';
import { Cancel, ForeignRead, List, Read } from './timers/read-cancel.steps.js';
import { type CallReceiver, DuringCall, type Then } from './timers/during-call.steps.js';
import { type Away, MoveLaterRedisAway } from './timers/redis-away.step.js';
import { settleAndCheck } from './timers/settle-and-check.js';
import { LIMIT_SCOPES, RateLimit } from './timers/rate-limit.step.js';

let world: World;
beforeAll(async () => {
  world = await startWorld('timers', 2, { timers: true });
}, 120_000);
afterAll(async () => {
  await world?.close();
});

const client = fc.constantFrom<ModelClient>(...MODEL_CLIENTS);
const keyIndex = fc.nat({ max: KEY_POOL - 1 });
/** Fire times from at once to a few seconds out: every timer fires within its run. */
const delay = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 800 }), fc.integer({ min: 800, max: 2_500 }));
const ask = (mode: fc.Arbitrary<Ask['mode']>): fc.Arbitrary<Ask> =>
  fc.record({
    mode,
    delayMs: delay,
    absolute: fc.boolean(),
    maxWaitMs: fc.option(fc.integer({ min: 200, max: 2_000 }), { nil: undefined, freq: 4 }),
    // Mostly the service's default; sometimes few, so a failing receiver ends a firing FAILED.
    maxAttempts: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined, freq: 2 }),
  });
const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(client, keyIndex, ask(fc.constant('replace'))).map(([c, k, a]) => new Put(c, k, a)) },
  { weight: 2, arbitrary: fc.tuple(client, keyIndex, ask(fc.constant('keep'))).map(([c, k, a]) => new Put(c, k, a)) },
  { weight: 2, arbitrary: fc.tuple(client, keyIndex, ask(fc.constant('debounce'))).map(([c, k, a]) => new Put(c, k, a)) },
  {
    weight: 3,
    arbitrary: fc.tuple(fc.nat(), fc.oneof(fc.integer({ min: 300, max: 1_500 }), fc.integer({ min: -1_000, max: -100 }))).map(([i, d]) => new Change(i, d)),
  },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), delay).map(([i, d]) => new Keep(i, d)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new Cancel(i)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(client, fc.uniqueArray(fc.record({ keyIndex, ask: ask(fc.constantFrom(...MODES)) }), { minLength: 1, maxLength: 4, selector: (i) => i.keyIndex }))
      .map(([c, items]) => new Batch(c, items)),
  },
  { weight: 1, arbitrary: fc.nat().map((i) => new Read(i)) },
  { weight: 1, arbitrary: client.map((c) => new List(c)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ForeignRead(i)) },
  // Aimed at what random steps seldom meet: a change or cancel while the timer's call runs, and a debounce burst.
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        // Mostly a slow success: the change meets a call that will go through.
        fc.constantFrom<CallReceiver>('slowOk', 'slowOk', 'slowOk', 'slowTimeout', 'hang', 'fail', 'reject'),
        fc.constantFrom<Then>('replace', 'replace', 'cancel', 'cancel', 'cancel', 'debounce', 'keep'),
        fc.integer({ min: 100, max: 1_500 }),
        client,
      )
      .map(([k, t, later, c]) => new DuringCall(k, t, later, c)),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        client,
        fc.option(keyIndex, { nil: null }),
        fc.integer({ min: 2, max: 5 }),
        fc.integer({ min: 200, max: 900 }),
        fc.integer({ min: 300, max: 1_500 }),
        fc.integer({ min: 50, max: 400 }),
      )
      .map(([c, k, n, d, w, g]) => new DebounceBurst(c, k, n, d, w, g)),
  },
  // A move later whose new delivery job Redis loses: the old job comes first, and its claim must wait.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom<Away>('silenceRedis', 'restartRedis'), fc.integer({ min: 300, max: 1_200 }), fc.integer({ min: 1_500, max: 2_500 }), client)
      .map(([h, first, later, c]) => new MoveLaterRedisAway(h, first, later, c)),
  },
  // An operator's rate limit on the queue, the job type or the receiver's endpoint: firings wait their turn.
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom(...LIMIT_SCOPES), fc.option(fc.integer({ min: 1, max: 10 }), { nil: null, freq: 4 }))
      .map(([s, n]) => new RateLimit(s, n)),
  },
  // The receiver's answers decide every firing: they change often.
  { weight: 2, arbitrary: receivers<Model>(RECEIVER_KINDS) },
);

describe('timers, model-based', () => {
  it('keeps the timer rules under random modes, changes, cancels, receiver answers and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'timers',
      world: () => world,
      operations,
      receiverKinds: RECEIVER_KINDS,
      newModel,
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});

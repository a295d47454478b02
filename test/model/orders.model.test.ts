// Model-based suite of the orders domain: random sequences of creates by
// either of two clients (alone, or in bursts sharing a window, so their
// expiries go in batches; some repeated under their Idempotency-Key, some sent
// several times at once under one), pays, customer cancels, pay and cancel
// raced against each other, two pays raced, the other client paying,
// cancelling and reading an order (and creating under its Idempotency-Key
// value, its cancel raced with the owner's pay), an operator running an expiry
// job now (before its deadline) or cancelling it (the order then paid and
// moved past its deadline while still UNPAID), the retention pass (sometimes
// the moment a notice is on its way), deadlines moved by the client (later,
// or to a time earlier or later; raced with a pay; an order made with a long
// window moved much earlier at once; one moved past its deadline while its
// expiry job is gone) and extended by an operator, an order paid while its
// payment reminder waits for a retry, a deadline moved away and back to the
// same instant while its reminder waits for a retry, the clocks set apart for a
// while (the worker hosts' wall clocks off by seconds either way, Redis's
// clock stepped ahead: the expiries due within the step run now), reads, time
// steps around the payment windows, receiver behaviours and faults. The rules
// checked:
// - no effect crosses clients: another client's pay, cancel and read are
//   answered at once exactly as for an unknown id (404 ORDER_NOT_FOUND) and
//   change nothing, its create under the same key value makes an order of its
//   own; once settled, each order and its notice are its creator's, an order
//   only the other client cancelled is never cancelled for the customer, and
//   one only the other client paid is never PAID;
// - every answer agrees with the model at once: a 200 from pay only inside
//   the window (by the database clock, within EPS_MS) and never after a
//   cancel, ORDER_EXPIRED only once the window closed, a cancel refused only
//   for a paid order, a repeated create answers the same order;
// - once settled: a 200 from pay means PAID for ever; every other order is
//   CANCELLED, by the customer only if a cancel was answered 200, otherwise by
//   the timeout, never before its deadline by the database clock, and (no
//   fault from its creation, or its expiry's early run, to a second past the
//   deadline, its job not cancelled) within a second of it: by its own job,
//   back at the deadline however early it ran and whatever the hosts' clocks
//   said, not left to the reconciliation pass; one ORDER_CANCELLED row per
//   cancelled order and none for a paid one, SENT, and the receiver took it
//   (twice at most when a fault cut a send off, never otherwise);
// - the retention pass (run with a cutoff of now, amid the rest) deletes only
//   settled orders whose notice is settled: each one it took is checked as it
//   was last seen, its notice taken by the receiver once (none if paid), and
//   answered 404 from then on;
// - deadlines: a move answered 200 only for an order neither paid nor
//   cancelled and inside its window, to the deadline asked; an operator's
//   extension moves exactly the open orders of its range, by its seconds; no
//   order is cancelled before its latest deadline, and (no fault near) within
//   a second of it, however much earlier it was moved;
// - payment reminders (2 s windows, a second before the deadline): at most
//   one per deadline the order had, written between its time and the
//   deadline, never after the order was paid or cancelled, never sent by a
//   delivery that claimed it after that; an order unpaid through its last
//   deadline (no fault near) was reminded for it, its reminder not left
//   withdrawn by a move.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CancelExpiryJob, RunExpiryNow } from './orders/admin.steps.js';
import { SkewClocks, WORKERS } from './orders/clock.step.js';
import { Create, CreateBurst, CreateTogether, RepeatCreate } from './orders/create.steps.js';
import { AdminExtend, CreateAndMoveEarlier, MoveDeadline, MoveRacingPay, PayWhileReminderWaits, SettleBeforeReminder } from './orders/deadline.steps.js';
import { ForeignCancel, ForeignPay, ForeignRead, ForeignRepeatCreate, PayAgainstForeignCancel } from './orders/cross-client.steps.js';
import type { Model } from './orders/model.js';
import { MoveAwayAndBack } from './orders/move-away-and-back.step.js';
import { Cancel, Pay, PayAndCancel, PayTwice } from './orders/pay-cancel.steps.js';
import { Read } from './orders/read.step.js';
import { ReminderWrittenWhileExpiryWaits } from './orders/reminder-race.step.js';
import { Retention } from './orders/retention.step.js';
import { settleAndCheck } from './orders/settle-and-check.js';
import { type Step, runSuite } from './runner.js';
import { MODEL_CLIENTS, type ModelClient, type World, startWorld } from './world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld('orders', WORKERS, { clocks: true });
}, 120_000);
afterAll(async () => {
  await world?.close();
});

const window = fc.constantFrom<1 | 2>(1, 2);
const client = fc.constantFrom<ModelClient>(...MODEL_CLIENTS);
// A worker host's clock off by seconds (past the payment windows), ahead most
// often (where a time taken from it would bring an expiry back late), or right.
const hostOffset = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 1_000, max: 6_000 }) },
  { weight: 2, arbitrary: fc.integer({ min: -6_000, max: -1_000 }) },
  { weight: 1, arbitrary: fc.constant(0) },
);

const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(window, client).map(([t, c]) => new Create(t, c)) },
  { weight: 1, arbitrary: fc.tuple(window, fc.integer({ min: 2, max: 12 }), client).map(([t, n, c]) => new CreateBurst(t, n, c)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, same]) => new RepeatCreate(i, same)) },
  { weight: 3, arbitrary: fc.nat().map((i) => new Pay(i)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new Cancel(i)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new PayAndCancel(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new Read(i)) },
  { weight: 1, arbitrary: fc.boolean().map((racing) => new Retention(racing)) },
  // Races and an operator's hand on the expiry jobs: an expiry that runs
  // before its deadline (run-now) must leave the order open.
  { weight: 1, arbitrary: fc.tuple(window, fc.integer({ min: 2, max: 5 }), client).map(([t, n, c]) => new CreateTogether(t, n, c)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new PayTwice(i)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new RunExpiryNow(i)) },
  // An expiry job cancelled (Redis losing it), and the order then paid and
  // moved past its deadline while still UNPAID: only the pay's and the move's
  // deadline guards refuse them.
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(), fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 2, arbitrary: fc.integer({ min: 200, max: 700 }) }))
      .map(([i, late]) => new CancelExpiryJob(i, late)),
  },
  // The deadline moved: later by seconds or to a time (earlier or later), most often an open order's.
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.nat(),
        fc.oneof(
          fc.integer({ min: 1, max: 2 }).map((s) => ({ extendBySeconds: s })),
          fc.integer({ min: 300, max: 2_500 }).map((ms) => ({ inMs: ms })),
        ),
      )
      .map(([i, to]) => new MoveDeadline(i, to)),
  },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 0, max: 200 })).map(([i, lead]) => new MoveRacingPay(i, lead)) },
  // Moved much earlier at once: an expiry left at the old deadline would come seconds late.
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 300, max: 1_200 }), client).map(([ms, c]) => new CreateAndMoveEarlier(ms, c)) },
  // The same, the move sent before the pay.
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 200, max: 700 })).map(([i, late]) => new CancelExpiryJob(i, late, 'move')) },
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 500, max: 2_500 }), fc.integer({ min: 1, max: 2 })).map(([ms, s]) => new AdminExtend(ms, s)) },
  { weight: 1, arbitrary: client.map((c) => new PayWhileReminderWaits(c)) },
  // Moved away and back to the same deadline while its reminder waits for a retry: taken back (judged at once), not lost.
  { weight: 1, arbitrary: client.map((c) => new MoveAwayAndBack(c)) },
  // Settled before the reminder's time: its job still fires then and must write nothing.
  { weight: 1, arbitrary: fc.tuple(client, fc.constantFrom<'pay' | 'cancel'>('pay', 'cancel')).map(([c, how]) => new SettleBeforeReminder(c, how)) },
  // A reminder committed while the expiry waits for the order: the expiry's statement cannot see it, yet withdraws it.
  { weight: 1, arbitrary: client.map((c) => new ReminderWrittenWhileExpiryWaits(c)) },
  // The clocks apart for a while: each worker host's off by seconds either
  // way (or right), an order made meanwhile, and Redis's clock stepped ahead
  // past its deadline (the expiries due within the step run now).
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.array(hostOffset, { minLength: WORKERS, maxLength: WORKERS }),
        fc.integer({ min: 1_000, max: 5_000 }),
        window,
        fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.integer({ min: 2_000, max: 3_500 }) }),
      )
      .map(([offsets, forMs, t, ahead]) => new SkewClocks(offsets, forMs, t, ahead)),
  },
  // The other client's hand on an order, most often one of the latest (still
  // open: where a missing client condition would pay or cancel it).
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, recent]) => new ForeignPay(i, recent)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, recent]) => new ForeignCancel(i, recent)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, recent]) => new ForeignRead(i, recent)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, recent]) => new PayAgainstForeignCancel(i, recent)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ForeignRepeatCreate(i)) },
);

describe('orders, model-based', () => {
  it('keeps the rules under random operations, time steps and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'orders',
      world: () => world,
      operations,
      newModel: () => ({ orders: [], clockSteps: 0 }),
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});

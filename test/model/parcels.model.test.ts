// Model-based suite of parcel batching: random area creations and rebinds
// (vehicle and sorter contact), parcel intakes one by one, in concurrent
// bursts (races of the FULL path) and in batch requests (POST /parcels/batch,
// new parcels beside a repeat, a conflict and an unknown area), repeated and conflicting intakes, intakes
// for an unknown area, reads of parcels and batches, stray entries planted in
// Redis (a parcel of one area in another's group; and such a group then
// filled up at once by intakes of its area), time steps around the
// 1.5 s maximum wait, receiver behaviours and faults. The rules checked:
// - every answer agrees with the model at once: a parcel arrives (database
//   time) while its intake is under way, a repeat answers the same parcel, a
//   conflict or an unknown area is refused, a parcel seen BATCHED stays in that
//   batch, a batch read twice is the same, no batch above the size;
// - once settled: every accepted parcel in exactly one batch of its own area
//   and no row for a refused one; a FULL batch holds exactly the batch size and
//   is made during an intake of its area or the put-back a stray entry in its
//   group brings about (unless a fault struck this run or the one before), a
//   TIMEOUT batch no earlier than its first arrival + the maximum wait; a
//   batch's vehicle and its notice's recipient are one version of its area at
//   the batch's moment; one
//   BATCH_DISPATCHED notice per batch, SENT, taken by the receiver (twice at
//   most when a fault cut a send off); without faults no parcel waits much
//   past the maximum wait (the flusher, or the reconciliation pass behind it),
//   and a TIMEOUT batch is the flusher's (made before the pass's grace ends);
//   a parcel planted as a stray entry while its area's wait counted from it
//   is batched with its area on time unless a fault came near (a fault
//   elsewhere in the run does not excuse it).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchIntake, Burst, ConflictIntake, Intake, IntakeUnknownArea, PutArea, RepeatIntake } from './parcels/intake.steps.js';
import { AREAS, type Model, PLATES } from './parcels/model.js';
import { ReadBatch, ReadParcel } from './parcels/read.steps.js';
import { settleAndCheck } from './parcels/settle-and-check.js';
import { StrayEntry } from './parcels/stray-entry.step.js';
import { StrayThenFill } from './parcels/stray-fill.step.js';
import { type Step, runSuite } from './runner.js';
import { type World, startWorld } from './world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld('parcels');
}, 120_000);
afterAll(async () => {
  await world?.close();
});

const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 2, arbitrary: fc.tuple(fc.integer({ min: 0, max: AREAS - 1 }), fc.constantFrom(...PLATES)).map(([i, plate]) => new PutArea(i, plate)) },
  { weight: 5, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 4 })).map(([a, n]) => new Intake(a, n)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 2, max: 7 })).map(([a, n]) => new Burst(a, n)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 25 }), fc.nat()).map(([a, n, o]) => new BatchIntake(a, n, o)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new RepeatIntake(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ConflictIntake(i)) },
  { weight: 1, arbitrary: fc.constant(new IntakeUnknownArea()) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ReadParcel(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ReadBatch(i)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.nat()).map(([p, o]) => new StrayEntry(p, o)) },
  // Aimed: a group holding a stray (another area's parcel, or a batched one's
  // stale entry) filled up at once: a FULL take short of parcels it may batch.
  { weight: 3, arbitrary: fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(true, true, false)).map(([p, o, own]) => new StrayThenFill(p, o, own)) },
);

describe('parcels, model-based', () => {
  it('keeps the rules under random operations, time steps and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'parcels',
      world: () => world,
      operations,
      newModel: () => ({ areas: [], parcels: [], refused: [], batchIds: [], seen: new Map(), versions: 0, strays: 0, aimed: [] }),
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});

// Model-based suite of parcel batching for two clients whose areas have the
// same codes and whose parcels the same tracking numbers (each client's
// own): random area creations and rebinds (vehicle and sorter contact) by
// either client, parcel intakes one by one, in concurrent bursts (races of
// the FULL path), in batch requests (POST /parcels/batch, new parcels beside
// a repeat, a conflict and an unknown area) and by both clients at once
// under the same tracking numbers into their areas of one code (twins, often
// committed by one statement), repeated and conflicting intakes, intakes for
// an unknown area, reads of parcels and batches, the other client's reads of
// a parcel, area and batch, its intakes under an area code it has none of
// and its PUT of an area under the owner's code, stray entries planted in
// Redis (a parcel of one area in another's group, of either client; and
// such a group then filled up at once by intakes of its area), area rules
// changed while parcels wait (a batch size of 1..3 or the default 4, a
// maximum wait of 1..3 s or the default 1.5 s), manual flushes (one after
// the area's Redis group lost what waited while parcels kept coming: more
// than its size waiting), withdraws and moves of parcels, opposite moves of
// parcels at once (fresh ones, in rounds), a flush racing the FULL add and a
// withdraw on one area, time steps around the maximum waits, receiver
// behaviours and faults. The rules checked:
// - no effect crosses clients: another client's parcel, area and batch are
//   answered exactly as unknown ones (404, the same body but for the id), or
//   as the caller's own of that tracking number or code; its intake under an
//   area code only the owner has is 422 UNKNOWN_AREA as for an unknown code,
//   writing nothing; its PUT under the owner's code makes its own area and
//   leaves the owner's vehicle and sorter as they were; once settled, every
//   batch holds parcels of its own client and area only, its notice is its
//   client's and goes to its own area's sorter, every area is as its own
//   client last put it, and each client's batches keep the size and wait
//   rules whatever the other client took in under the same code;
// - every answer agrees with the model at once: a parcel arrives (database
//   time) while its intake is under way, a repeat answers the same parcel, a
//   conflict or an unknown area is refused, a parcel seen BATCHED stays in that
//   batch, a batch read twice is the same, no batch above its area's size
//   (the rule current when it was made), a flush's batch MANUAL of its own
//   area's parcels, a withdrawn parcel never seen in a batch (nor seen
//   batched answered WITHDRAWN), a moved one in its new area, arrival kept,
//   and after opposite moves in its area's Redis group and no other (looked
//   up in Redis); a waiting group's deadline, when its TIMEOUT batch is due,
//   at its first arrival + its area's own maximum wait (looked up in Redis
//   after a rule change and after intakes);
// - once settled: every accepted parcel not withdrawn in exactly one batch of
//   its own (last) area, a withdrawn one WITHDRAWN in none, no row for a
//   refused one; every batch counts the parcels it holds; a FULL batch holds
//   exactly its area's batch size and is made during an intake, a rule
//   change, a move or a flush of its area or the put-back a stray entry in
//   its group brings about (unless a fault struck this run or the one
//   before), a MANUAL one during a flush of its area, a TIMEOUT batch no
//   earlier than its first arrival + its area's maximum wait; a
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
import { ForeignIntake, ForeignPutArea, ForeignReadArea, ForeignReadBatch, ForeignReadParcel } from './parcels/cross-client.steps.js';
import { Flush, FlushRace, Move, SetAreaRule, Withdraw } from './parcels/changes.steps.js';
import { BatchIntake, Burst, ConflictIntake, Intake, IntakeUnknownArea, PutArea, RepeatIntake } from './parcels/intake.steps.js';
import { LostGroupFlush } from './parcels/lost-group.step.js';
import { AREAS, type Model, PLATES, RULE_SIZES, RULE_WAITS_S, newModel } from './parcels/model.js';
import { MoveRace } from './parcels/move-race.step.js';
import { ReadBatch, ReadParcel } from './parcels/read.steps.js';
import { settleAndCheck } from './parcels/settle-and-check.js';
import { StrayEntry } from './parcels/stray-entry.step.js';
import { StrayThenFill } from './parcels/stray-fill.step.js';
import { TwinIntake } from './parcels/twin.step.js';
import { type Step, runSuite } from './runner.js';
import { MODEL_CLIENTS, type ModelClient, type World, startWorld } from './world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld('parcels');
}, 120_000);
afterAll(async () => {
  await world?.close();
});

const client = fc.constantFrom<ModelClient>(...MODEL_CLIENTS);
const plate = fc.constantFrom(...PLATES);

const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 2, arbitrary: fc.tuple(fc.integer({ min: 0, max: AREAS - 1 }), plate, client).map(([i, p, c]) => new PutArea(i, p, c)) },
  { weight: 5, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 4 })).map(([a, n]) => new Intake(a, n)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 2, max: 7 })).map(([a, n]) => new Burst(a, n)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 25 }), fc.nat()).map(([a, n, o]) => new BatchIntake(a, n, o)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new RepeatIntake(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ConflictIntake(i)) },
  { weight: 1, arbitrary: client.map((c) => new IntakeUnknownArea(c)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ReadParcel(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new ReadBatch(i)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.nat()).map(([p, o]) => new StrayEntry(p, o)) },
  // Aimed: a group holding a stray (another area's parcel, or a batched one's
  // stale entry) filled up at once: a FULL take short of parcels it may batch.
  { weight: 3, arbitrary: fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(true, true, false)).map(([p, o, own]) => new StrayThenFill(p, o, own)) },
  // Both clients' parcels of one tracking number due at one moment: one flush
  // round commits both (where a parcel attached by its number alone crosses).
  { weight: 4, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 3 }), plate).map(([a, n, p]) => new TwinIntake(a, n, p)) },
  // The other client's hand on an area, parcel or batch.
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, shared]) => new ForeignReadParcel(i, shared)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, shared]) => new ForeignReadArea(i, shared)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new ForeignReadBatch(i)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.boolean(), client).map(([i, batch, c]) => new ForeignIntake(i, batch, c)) },
  { weight: 2, arbitrary: fc.tuple(fc.nat(), plate, client).map(([i, p, c]) => new ForeignPutArea(i, p, c)) },
  // Changes to what waits: an area's rule, a manual flush, a withdraw, a move,
  // and a flush racing the FULL add and a withdraw on one area.
  {
    weight: 3,
    arbitrary: fc.tuple(fc.nat(), fc.constantFrom(...RULE_SIZES), fc.constantFrom(...RULE_WAITS_S)).map(([a, s, w]) => new SetAreaRule(a, s, w)),
  },
  // Half the flushes (by a bit of the pick, so the draw stays as it was) after the area's group lost what waited:
  // more than its size waiting.
  { weight: 2, arbitrary: fc.nat().map((a) => ((a >> 4) & 1 ? new LostGroupFlush(a) : new Flush(a))) },
  { weight: 3, arbitrary: fc.nat().map((i) => new Withdraw(i)) },
  // Half the moves (as above) raced: opposite moves of parcels at once (fresh ones, judged in both groups), each ending in
  // the group of the area its row says.
  { weight: 2, arbitrary: fc.tuple(fc.nat(), fc.nat()).map(([i, t]) => ((t >> 4) & 1 ? new MoveRace(i, t) : new Move(i, t))) },
  { weight: 3, arbitrary: fc.tuple(fc.nat(), fc.nat()).map(([i, t]) => new MoveRace(i, t)) },
  { weight: 3, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 1, max: 4 })).map(([a, n]) => new FlushRace(a, n)) },
);

describe('parcels, model-based', () => {
  it('keeps the rules under random operations, time steps and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'parcels',
      world: () => world,
      operations,
      newModel,
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});

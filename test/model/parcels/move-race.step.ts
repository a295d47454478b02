// The parcels model suite's race of opposite moves: parcels each moved to
// another area of their client and back at the same moment, then looked for
// in the Redis groups of both areas (groups.probe.ts).
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import type { Reply } from '../../chaos/drivers/http.js';
import type { Real } from '../runner.js';
import { Move } from './changes.steps.js';
import { TAKE_MARGIN_MS, calmSince, groupOfArea, noteLook, serviceBatcher } from './groups.probe.js';
import { intake } from './intake.steps.js';
import {
  type Area,
  LINGER_MS,
  type Model,
  type Parcel,
  areaOf,
  fail,
  noteChange,
  observeParcel,
  parcelsOf,
  trackingOf,
  versionsAt,
  windowOf,
} from './model.js';

/** Fresh parcels raced at most (as many as the area's group has room for). */
const FRESH = 3;
/** Races of the fresh parcels at most (as many as stay waiting): each a new chance of the interleaving that loses a parcel. */
const ROUNDS = 3;

/** The earliest a take (TIMEOUT) of either group may come, ms since epoch. */
type Due = number;

/**
 * Opposite moves of parcels at once: the picked parcel and new ones of its
 * area (taken in just before, as many as its group has room for), each
 * moved to another area of its client and back to its own, all together.
 * Whichever commit lands last decides a parcel's area (read back); still
 * waiting there, it must be in that area's Redis group and in no other (each
 * move's Redis steps racing the other's once left it in the loser's group,
 * or in none, until the reconciliation pass; a parcel in none is only late,
 * and a moved one's lateness is excused). Judged when no fault came near
 * the race; in its own group only while neither group can be being taken
 * (a take under way holds it in neither): fresh parcels, whose groups are
 * not due for a while, are what makes that hold.
 */
export class MoveRace extends Move {
  override async act(m: Model, r: Real) {
    const p = this.parcel(m);
    const home = areaOf(m, p.client, p.area);
    const to = this.targetOf(m, p);
    if (!home || !to) return;
    const waiting = (await dueTimes(r, home, to))?.waiting;
    const room = waiting === undefined ? 0 : (home.versions.at(-1)?.size ?? 1) - 1 - waiting;
    const base = parcelsOf(m, p.client);
    const fresh: Parcel[] = [];
    for (let k = 0; k < Math.min(FRESH, room); k++) {
      await intake(m, r, home, trackingOf(r, base + k));
      fresh.push(m.parcels.at(-1) as Parcel);
    }
    // The fresh ones apart, round after round (each a new race): the picked parcel may be due, its group taken at once wherever it lands.
    for (let round = 0; round < ROUNDS && fresh.some((x) => !x.batchId); round++) {
      await raceAndJudge(
        m,
        r,
        fresh.filter((x) => !x.batchId),
        home,
        to,
      );
    }
    // An old parcel may meet a reconciliation pass's put back (into the group its row said when read): any fault near excuses it.
    await raceAndJudge(m, r, [p], home, to, true);
  }
  override toString() {
    return `MoveRace(${this.pick}, ${this.target})`;
  }
}

/** Both groups' deadlines (none waiting: never), and how many wait in the home group; null when Redis does not answer. */
async function dueTimes(r: Real, home: Area, to: Area): Promise<{ home: number; to: number; waiting: number } | null> {
  try {
    const [h, t] = await Promise.all([home, to].map((a) => redisCall(serviceBatcher(r).waiting(groupOfArea(a)), 'move race: waiting')));
    return { home: h?.deadline ?? Infinity, to: t?.deadline ?? Infinity, waiting: h?.count ?? 0 };
  } catch (err) {
    if (!isRedisUnavailable(err)) throw err;
    return null;
  }
}

/**
 * Races `xs` (of `home`) all at once and judges each. Their groups may be
 * taken from the earliest of their deadlines before the race and of the
 * raced parcels' own (they join either group with their arrival).
 */
async function raceAndJudge(m: Model, r: Real, xs: Parcel[], home: Area, to: Area, anyFault = false): Promise<void> {
  const before = await dueTimes(r, home, to);
  const waits = [home, to].flatMap((a) => versionsAt(a, Date.now()).map((v) => v.waitMs));
  const start = Date.now();
  const answers = await Promise.all(xs.map((x) => raceOne(m, r, x, home, to)));
  // A fault near the race may leave a move's Redis step undone or run late (a stale entry the next commit drops).
  const faultless = answers.flat().every((a) => a.attempts === 1) && calmSince(r, start - LINGER_MS, anyFault);
  const due = before && Math.min(before.home, before.to, Math.min(...xs.map((x) => x.createdAt)) + Math.min(...waits));
  for (const x of xs) await judge(m, r, x, { home, to }, faultless ? due : null);
}

/** The two moves of `x` at once (to `to`, back to `home`); their answers. */
async function raceOne(m: Model, r: Real, x: Parcel, home: Area, to: Area): Promise<Reply[]> {
  // Either area may be the one it ends in (a round after the first may find it in `to`).
  x.movedTo = x.area === to.code ? home.code : to.code;
  const send = (a: Area) => r.world.httpAs(x.client).send('POST', `/parcels/${x.trackingNo}/move`, { area: a.code });
  const answers = await Promise.all([send(to), send(home)]);
  to.groupings.push(windowOf(answers[0]));
  home.groupings.push(windowOf(answers[1]));
  for (const res of answers) {
    noteChange(m, 'move race', res);
    if (res.status !== 200 && !(res.status === 409 && ['ALREADY_BATCHED', 'PARCEL_WITHDRAWN'].includes(String(res.body.code))))
      fail(`move race of ${x.trackingNo} between ${home.code} and ${to.code} as ${x.client}`, res);
  }
  x.moved = true;
  return answers;
}

/**
 * Reads `x` back and, still waiting and `due` given (no fault near), looks
 * for it in both groups: taken out of the other one (nothing to take when
 * right), and added to its own (nothing added when right) while no take of
 * either group can be under way. One found missing from its own group and
 * batched a moment later was in a take after all (a put back of another
 * caller filled the group): not judged.
 */
async function judge(m: Model, r: Real, x: Parcel, areas: { home: Area; to: Area }, due: Due | null): Promise<void> {
  const what = `move race of ${x.trackingNo} between ${areas.home.code} and ${areas.to.code} as ${x.client}`;
  const got = await r.world.httpAs(x.client).send('GET', `/parcels/${x.trackingNo}`);
  if (got.status !== 200) fail(`${what}: read back`, got);
  observeParcel(m, x, got, `${what}: read back`, true);
  delete x.movedTo;
  if (got.body.status !== 'WAITING') return noteLook(m, 'move race: not waiting');
  if (due === null) return noteLook(m, 'move race: fault near');
  const [own, other] = got.body.area === areas.to.code ? [areas.to, areas.home] : [areas.home, areas.to];
  const batcher = serviceBatcher(r);
  try {
    const stray = await redisCall(batcher.remove(groupOfArea(other), [x.trackingNo]), 'move race: other group');
    if (stray > 0) fail(`${what}: waits in ${own.code}, but was left in ${other.code}'s Redis group`, got);
    if (due < Date.now() + TAKE_MARGIN_MS || !calmSince(r, Date.now())) return noteLook(m, 'move race: other group judged (a take may be under way)');
    const probe = await redisCall(batcher.add(groupOfArea(own), x.trackingNo, x.createdAt), 'move race: own group');
    noteLook(m, 'move race: both groups judged');
    // Put back whatever the probe's add took (an add takes full batches even when it adds nothing; this caller commits nothing).
    if (probe.batches.length > 0) await redisCall(batcher.restore(groupOfArea(own), probe.batches.flat()), 'move race: put back');
    if (!probe.added) return;
    // Found missing: see whether it was in a take.
    await new Promise((res) => setTimeout(res, TAKE_MARGIN_MS));
    const again = await r.world.httpAs(x.client).send('GET', `/parcels/${x.trackingNo}`);
    if (again.status === 200 && again.body.status === 'WAITING') fail(`${what}: waits in ${own.code}, but was in none of the two Redis groups`, got);
  } catch (err) {
    if (!isRedisUnavailable(err)) throw err;
  }
}

// The record groups (lua/lib/records.lua) against a model: random schedules
// (groups on and off, short and long payloads), claims, acks, retries,
// releases, deaths, redrives, cancels and deletes must keep every job's one
// record where the layout says (R1), the groups' count exact (R2), every group
// a listpack of short values (R3), and each job in the model's state with its
// payload. Also: records of the one-HASH layout are read, moved and deleted
// like any other, and groups stay listpacks as the shard grows.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/core/redis.js';
import { type ShardKeys, recordGroupKey } from '../../src/queue/keys.js';
import { type Queue, createQueue } from '../../src/queue/producer/queue.js';
import { runRedrive, runUngroup } from '../../src/queue/scripts/admin-scripts.js';
import { readLua } from '../../src/queue/scripts/registry.js';
import { runAck, runClaim, runNack, runRelease } from '../../src/queue/scripts/scripts.js';
import { dueIndexProblems, pendingJobs } from '../helpers/due-index.js';
import { getRecord, recordGroupKeys, recordGroupsState, setRecord } from '../helpers/records.js';
import { REDIS_ENV, dropPrefix, dropQueue, redisClient } from '../helpers/redis.js';
import { loadConfig } from '../../src/config.js';
import { ORDERS_QUEUE } from '../../src/modules/orders/orders.module.js';
import { ungroupCommand } from '../../src/cli/ungroup.js';

let redis: RedisClient;
const names: string[] = [];
let seq = 0;
beforeAll(() => {
  redis = redisClient('records-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

/** The same queue twice: one writing new records into groups, one into the jobs HASH (a build with groups off). */
function queues(tag: string): { on: Queue; off: Queue; k: ShardKeys } {
  const name = `rec-${tag}-${process.pid}-${seq++}`;
  names.push(name);
  const on = createQueue(redis, { name, types: { t: {} }, recordGroups: true });
  const off = createQueue(redis, { name, types: { t: {} }, recordGroups: false });
  return { on, off, k: on.keys[0]! };
}

/** R1-R3 and the split rule; returns every record, id -> [key, text]. */
async function recordProblems(k: ShardKeys): Promise<{ problems: string[]; where: Map<string, string[]> }> {
  const problems: string[] = [];
  const state = await recordGroupsState(redis, k);
  const where = new Map<string, string[]>();
  let inGroups = 0;
  for (const key of [...(await recordGroupKeys(redis, k)), k.jobs]) {
    const fields = await redis.hgetall(key);
    for (const [id, text] of Object.entries(fields)) {
      where.set(id, [...(where.get(id) ?? []), key]);
      if (key === k.jobs) continue;
      inGroups++;
      if (recordGroupKey(k, id, state) !== key) problems.push(`R1: ${id} in ${key}, its group is ${recordGroupKey(k, id, state)}`);
      if (Buffer.byteLength(id) > 64 || Buffer.byteLength(text) > 64) problems.push(`R3: ${id} in ${key} longer than 64 B`);
    }
    // Room is made before records move in: no group past 128 (a server set at its zset default would make it a hashtable).
    if (key !== k.jobs && Object.keys(fields).length > 128) problems.push(`room: ${key} holds ${Object.keys(fields).length} records`);
    if (key !== k.jobs && Object.keys(fields).length > 0) {
      const enc = await redis.object('ENCODING', key);
      if (enc !== 'listpack') problems.push(`R3: ${key} is a ${String(enc)}`);
    }
  }
  for (const [id, keys] of where) if (keys.length > 1) problems.push(`R1: ${id} has records in ${keys.join(', ')}`);
  for (const id of await redis.zrange(k.inflight, 0, -1)) {
    if (where.get(id)?.[0] !== k.jobs) problems.push(`R4: ${id} is in flight, its record in ${String(where.get(id))}`);
  }
  if (inGroups !== state.count) problems.push(`R2: ${inGroups} records in groups, n says ${state.count}`);
  if (state.count > (2 ** state.level + state.split) * REC_LOAD) problems.push(`split: ${state.count} records in ${2 ** state.level + state.split} groups`);
  return { problems, where };
}

/** lib/records.lua's REC_LOAD, read from the script (records per group on average before a split). */
const REC_LOAD = Number(/^local REC_LOAD = (\d+)$/m.exec(readLua('lib/records.lua'))?.[1]);

type Cmd =
  | { kind: 'schedule'; groups: boolean; ids: number[]; pad: number; mode: 'upsert' | 'nx' | 'xx' }
  | { kind: 'claim'; max: number }
  | { kind: 'settle'; how: 'ack' | 'retry' | 'release' | 'dead'; count: number }
  | { kind: 'cancel'; id: number }
  | { kind: 'redrive' }
  | { kind: 'deleteDead' }
  | { kind: 'ungroup' };

const IDS = 400;
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('schedule' as const),
      groups: fc.boolean(),
      ids: fc.array(fc.nat(IDS - 1), { minLength: 1, maxLength: 120 }),
      pad: fc.integer({ min: 0, max: 60 }),
      mode: fc.constantFrom('upsert' as const, 'nx' as const, 'xx' as const),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('claim' as const), max: fc.integer({ min: 1, max: IDS }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('settle' as const),
      how: fc.constantFrom('ack' as const, 'retry' as const, 'release' as const, 'dead' as const),
      count: fc.integer({ min: 1, max: IDS }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id: fc.nat(IDS - 1) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'redrive' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'deleteDead' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'ungroup' as const }) },
);

type State = 'pending' | 'in_flight' | 'dead';

describe('record groups', () => {
  it('keep one record per job where the layout says, an exact count and listpack groups, through random operations', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 5, maxLength: 40 }), async (cmds) => {
        const { on, off, k } = queues(`model-${run++}`);
        // id -> its state and payload; tokens of in-flight jobs.
        const model = new Map<string, { state: State; payload: unknown }>();
        const tokens = new Map<string, number>();
        for (const [step, c] of cmds.entries()) {
          const at = `step ${step} ${JSON.stringify(c)}`;
          if (c.kind === 'schedule') {
            // Padded payloads make records near and past 64 B: those past it belong in the jobs HASH, and
            // those a claim's token takes past it move there.
            const jobs = c.ids.map((n) => ({ id: `job-${n}`, type: 't', delayMs: 0, mode: c.mode, payload: { n, pad: 'x'.repeat(c.pad) } }));
            const results = await (c.groups ? on : off).scheduleMany(jobs);
            results.forEach((r, i) => {
              const j = jobs[i]!;
              if (r.status === 'created' || r.status === 'updated') {
                model.set(j.id, { state: 'pending', payload: j.payload });
                tokens.delete(j.id);
              }
            });
          } else if (c.kind === 'claim') {
            const r = await runClaim(redis, k, c.max, 600_000, 0);
            for (const j of r.jobs) {
              expect(model.get(j.id)?.state, at).toBe('pending');
              model.get(j.id)!.state = 'in_flight';
              tokens.set(j.id, Number(j.record.split(',')[0]));
            }
          } else if (c.kind === 'settle') {
            for (const [id, token] of [...tokens].slice(0, c.count)) {
              tokens.delete(id);
              const m = model.get(id)!;
              if (c.how === 'ack') {
                expect((await runAck(redis, k, [{ id, token }])).acked, at).toBe(1);
                model.delete(id);
              } else if (c.how === 'retry') {
                expect((await runNack(redis, k, id, token, 'retry', 0, 'boom')).code, at).toBe(1);
                m.state = 'pending';
              } else if (c.how === 'release') {
                expect(await runRelease(redis, k, [{ id, token }]), at).toBe(1);
                m.state = 'pending';
              } else {
                expect((await runNack(redis, k, id, token, 'dead', 0, 'boom')).code, at).toBe(2);
                m.state = 'dead';
              }
            }
          } else if (c.kind === 'cancel') {
            const id = `job-${c.id}`;
            expect((await on.cancel(id)).cancelled, at).toBe(model.has(id));
            model.delete(id);
            tokens.delete(id);
          } else if (c.kind === 'redrive') {
            const dead = [...model].find(([, m]) => m.state === 'dead');
            if (dead) {
              expect(await runRedrive(redis, k, { id: dead[0] }), at).toBe(1);
              dead[1].state = 'pending';
            }
          } else if (c.kind === 'deleteDead') {
            const dead = [...model].find(([, m]) => m.state === 'dead');
            if (dead) {
              expect(await on.deleteDead(dead[0]), at).toBe(true);
              model.delete(dead[0]);
            }
          } else {
            // A rollback's first step: every record back in the jobs HASH, the groups' state gone.
            await off.ungroup();
            expect(await redis.exists(k.records), at).toBe(0);
            const { where } = await recordProblems(k);
            expect([...where.values()].filter((keys) => keys.length !== 1 || keys[0] !== k.jobs), at).toEqual([]);
          }
          const { problems, where } = await recordProblems(k);
          expect(problems, at).toEqual([]);
          expect([...where.keys()].sort(), at).toEqual([...model.keys()].sort());
        }
        expect(await dueIndexProblems(redis, k)).toEqual([]);
        for (const [id, m] of model) {
          const job = await on.get(id);
          expect(job, id).toMatchObject({ state: m.state, payload: m.payload });
        }
        const count = (s: State) => [...model.values()].filter((m) => m.state === s).length;
        expect(await on.stats()).toMatchObject({ pending: count('pending'), inFlight: count('in_flight'), dead: count('dead') });
      }),
      { numRuns: Number(process.env.RECORDS_RUNS ?? 25), seed: process.env.MODEL_RANDOM_SEED ? Number(process.env.MODEL_RANDOM_SEED) : undefined },
    );
  });

  it('reads, moves and deletes records of the one-HASH layout (builds before the groups) like any other', async () => {
    const { on, k } = queues('legacy');
    // Written as an earlier build wrote them: the record in the jobs HASH, the id in its due bucket.
    const old = createQueue(redis, { name: on.name, types: { t: {} }, recordGroups: false });
    await old.scheduleMany(['a', 'b', 'c', 'd'].map((id) => ({ id, type: 't', delayMs: 0, payload: { id } })));
    expect(Object.keys(await redis.hgetall(k.jobs)).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(await recordGroupKeys(redis, k)).toEqual([`${k.recordGroups}0`]);
    expect(await redis.exists(`${k.recordGroups}0`)).toBe(0);

    expect(await on.get('a')).toMatchObject({ state: 'pending', payload: { id: 'a' } });
    expect((await on.cancel('d')).cancelled).toBe(true);
    const claimed = await runClaim(redis, k, 10, 600_000, 0);
    expect(claimed.jobs.map((j) => j.id).sort()).toEqual(['a', 'b', 'c']);
    const token = (id: string) => Number(claimed.jobs.find((j) => j.id === id)!.record.split(',')[0]);
    expect((await runAck(redis, k, [{ id: 'a', token: token('a') }])).acked).toBe(1);
    expect((await runNack(redis, k, 'b', token('b'), 'retry', 60_000, 'boom')).code).toBe(1);
    expect((await runNack(redis, k, 'c', token('c'), 'dead', 0, 'boom')).code).toBe(2);
    // Groups still off (the last schedule said so): b and c stay where they were written; a and d are gone.
    expect(Object.keys(await redis.hgetall(k.jobs)).sort()).toEqual(['b', 'c']);
    // A schedule with groups on: its new job goes to its group, and a record rewritten from then on moves to its own.
    await on.schedule({ id: 'e', type: 't', delayMs: 60_000 });
    expect(await redis.hkeys(`${k.recordGroups}0`)).toEqual(['e']);
    expect(await runRedrive(redis, k, { id: 'c' })).toBe(1);
    expect(await redis.hkeys(k.jobs)).toEqual(['b']);
    expect((await redis.hkeys(`${k.recordGroups}0`)).sort()).toEqual(['c', 'e']);
    expect(await on.stats()).toMatchObject({ pending: 3, inFlight: 0, dead: 0 });
    expect(await recordGroupsState(redis, k)).toMatchObject({ count: 2 });
    expect((await recordProblems(k)).problems).toEqual([]);
  });

  it('moves a record that grew past 64 B on its claim to the jobs HASH, and back to its group when it is pending again', async () => {
    const { on, k } = queues('grow');
    // A record of 0,0,<13-digit due>,,t,<payload>: 64 B with this 43-byte payload; the claim's token adds about 15.
    const payload = { p: 'x'.repeat(35) };
    await on.scheduleMany(['g1', 'g2'].map((id) => ({ id, type: 't', delayMs: 0, payload })));
    const state = await recordGroupsState(redis, k);
    for (const id of ['g1', 'g2']) expect((await redis.hget(recordGroupKey(k, id, state), id))!.length).toBe(64);
    const claimed = (await runClaim(redis, k, 2, 600_000, 0)).jobs;
    const token = (id: string) => Number(claimed.find((j) => j.id === id)!.record.split(',')[0]);
    for (const j of claimed) {
      expect(j.record.length).toBeGreaterThan(64);
      expect(await redis.hexists(recordGroupKey(k, j.id, state), j.id)).toBe(0);
      expect(await redis.hget(k.jobs, j.id)).toBe(j.record);
    }
    expect((await recordProblems(k)).problems).toEqual([]);
    expect(await recordGroupsState(redis, k)).toMatchObject({ count: 0 });
    expect((await runAck(redis, k, [{ id: 'g1', token: token('g1') }])).acked).toBe(1);
    expect((await runNack(redis, k, 'g2', token('g2'), 'retry', 60_000, 'boom')).code).toBe(1);
    expect(await redis.exists(k.jobs)).toBe(0);
    expect(await redis.hexists(recordGroupKey(k, 'g2', state), 'g2')).toBe(1);
    expect(await on.get('g2')).toMatchObject({ state: 'pending', attempts: 1, payload });
    expect(await recordGroupsState(redis, k)).toMatchObject({ count: 1 });
    expect((await recordProblems(k)).problems).toEqual([]);
  });

  it('moves every record out of the groups a few groups a call, jobs unchanged, for a build that reads only the jobs HASH', async () => {
    const { on, off, k } = queues('ungroup');
    await on.scheduleMany(Array.from({ length: 3_000 }, (_, i) => ({ id: `u${i}`, type: 't', delayMs: i < 1_000 ? 0 : 3_600_000, payload: { i } })));
    const claimed = (await runClaim(redis, k, 200, 600_000, 0)).jobs;
    for (const j of claimed.slice(0, 50)) await runNack(redis, k, j.id, Number(j.record.split(',')[0]), 'dead', 0, 'boom');
    const before = await on.stats();
    const groups = (await recordGroupKeys(redis, k)).length;
    expect(groups).toBeGreaterThan(100);
    let calls = 0;
    let moved = 0;
    for (let next: number | null = null; next !== -1; calls++) {
      const r = await runUngroup(redis, k, next, 7);
      moved += r.moved;
      next = r.next;
    }
    expect(calls).toBe(Math.ceil(groups / 7));
    expect(moved).toBe(2_800); // the 200 claimed were in the jobs HASH already
    expect(await redis.exists(k.records)).toBe(0);
    expect(await redis.hlen(k.jobs)).toBe(3_000);
    expect(await off.stats()).toMatchObject({ pending: before.pending, dueNow: before.dueNow, inFlight: before.inFlight, dead: before.dead, nextDueAt: before.nextDueAt });
    expect(await off.get('u2999')).toMatchObject({ state: 'pending', payload: { i: 2_999 } });
    expect((await runClaim(redis, k, 1_000, 600_000, 0)).jobs).toHaveLength(800);
    expect(await off.ungroup()).toBe(0);
    expect((await recordProblems(k)).problems).toEqual([]);
  });

  it('the ungroup command empties the groups of every queue, and refuses to run with the groups on', async () => {
    const prefix = `ug${process.pid}${seq++}`;
    const config = (groups: '0' | '1') => loadConfig({ ...REDIS_ENV, QUEUE_PREFIX: prefix, QUEUE_RECORD_GROUPS: groups });
    const orders = createQueue(redis, { name: ORDERS_QUEUE, prefix, types: { t: {} }, recordGroups: true });
    await orders.scheduleMany(Array.from({ length: 500 }, (_, i) => ({ id: `o${i}`, type: 't', delayMs: 3_600_000 })));
    const k = orders.keys[0]!;
    const lines: string[] = [];
    try {
      expect(await ungroupCommand(config('1'), (l) => lines.push(l))).toBe(2);
      expect(await recordGroupsState(redis, k)).toMatchObject({ count: 500 });
      expect(await ungroupCommand(config('0'), (l) => lines.push(l))).toBe(0);
      expect(lines).toContain(`${ORDERS_QUEUE}: 500 records moved to the one records HASH of each shard`);
      expect(await redis.exists(k.records)).toBe(0);
      expect(await redis.hlen(k.jobs)).toBe(500);
    } finally {
      await dropPrefix(redis, prefix);
    }
  });

  it('makes room in the groups before a release or a redrive moves many records into them', async () => {
    for (const how of ['release', 'redrive'] as const) {
      const { on, off, k } = queues(`room-${how}`);
      // 1 000 records written with groups off (an earlier build, or before the switch), claimed: all in the jobs HASH.
      await off.scheduleMany(Array.from({ length: 1_000 }, (_, i) => ({ id: `r${i}`, type: 't', delayMs: 0 })));
      const claimed = (await runClaim(redis, k, 1_000, 600_000, 0)).jobs;
      const held = claimed.map((j) => ({ id: j.id, token: Number(j.record.split(',')[0]) }));
      if (how === 'redrive') for (const h of held) await runNack(redis, k, h.id, h.token, 'dead', 0, 'boom');
      await on.schedule({ id: 'switch', type: 't', delayMs: 3_600_000 }); // groups on from here
      if (how === 'release') expect(await runRelease(redis, k, held)).toBe(1_000);
      else expect(await on.redriveAll(1_000)).toBe(1_000);
      expect(await recordGroupsState(redis, k)).toMatchObject({ count: 1_001 });
      const { problems } = await recordProblems(k);
      expect(problems, how).toEqual([]);
      expect(await on.stats()).toMatchObject({ pending: 1_001, inFlight: 0, dead: 0 });
    }
  });

  it('keeps a split made for a nack that then changes nothing (stale, or a death): every record still found', async () => {
    for (const how of ['stale', 'dead'] as const) {
      const { on, k } = queues(`nack-${how}`);
      // Groups exactly full (16 records in the one group), and a job in flight whose record is long (the jobs HASH).
      await on.schedule({ id: 'long', type: 't', delayMs: 0, payload: { pad: 'x'.repeat(80) } });
      await on.scheduleMany(Array.from({ length: REC_LOAD }, (_, i) => ({ id: `p${i}`, type: 't', delayMs: 3_600_000 })));
      expect(await recordGroupsState(redis, k)).toEqual({ level: 0, split: 0, count: REC_LOAD });
      const [j] = (await runClaim(redis, k, 1, 600_000, 0)).jobs;
      const token = Number(j!.record.split(',')[0]);
      const r = await runNack(redis, k, 'long', how === 'stale' ? token - 1 : token, how === 'stale' ? 'retry' : 'dead', 0, 'boom');
      expect(r.code).toBe(how === 'stale' ? 0 : 2);
      expect((await recordProblems(k)).problems, how).toEqual([]);
      for (let i = 0; i < REC_LOAD; i++) expect(await on.get(`p${i}`), `${how} p${i}`).toMatchObject({ state: 'pending' });
    }
  });

  it('empties the groups though a writer with groups on adds records behind the cursor (once more from the top)', async () => {
    const { on, off, k } = queues('ungroup-race');
    await on.scheduleMany(Array.from({ length: 40 }, (_, i) => ({ id: `a${i}`, type: 't', delayMs: 3_600_000 })));
    const first = await runUngroup(redis, k, null, 1);
    expect(first.next).toBeGreaterThanOrEqual(0);
    // A process still writing with groups on, between two of the command's steps.
    await on.scheduleMany(Array.from({ length: 40 }, (_, i) => ({ id: `b${i}`, type: 't', delayMs: 3_600_000 })));
    let moved = first.moved;
    let restarted = false;
    for (let next: number | null = first.next; next !== -1; ) {
      const r = await runUngroup(redis, k, next, 1);
      moved += r.moved;
      if (r.next === -2) restarted = true;
      next = r.next === -2 ? null : r.next;
    }
    expect(moved).toBe(80);
    expect(await redis.exists(k.records)).toBe(0);
    expect(await redis.hlen(k.jobs)).toBe(80);
    expect(await off.stats()).toMatchObject({ pending: 80 });
    expect(restarted).toBe(true);
  });

  it('leaves an unreadable pending record where it is when a schedule would replace it (its bucket is unknown)', async () => {
    const { on, k } = queues('unreadable');
    await on.scheduleMany(Array.from({ length: 300 }, (_, i) => ({ id: `j${i}`, type: 't', delayMs: 3_600_000 + i * 1_000 })));
    await setRecord(redis, k, 'j7', 'garbage');
    expect(await on.schedule({ id: 'j7', type: 't', delayMs: 400_000, payload: { v: 2 }, mode: 'upsert' })).toMatchObject({ status: 'not_found' });
    expect(await on.reschedule('j7', { delayMs: 400_000 })).toMatchObject({ status: 'not_found' });
    const held = (await pendingJobs(redis, k)).filter((j) => j.id === 'j7');
    expect(held).toHaveLength(1);
    expect(await getRecord(redis, k, 'j7')).toBe('garbage');
  });

  it('with groups off writes nothing of the groups, not even their state', async () => {
    const { off, k } = queues('off');
    await off.scheduleMany(Array.from({ length: 300 }, (_, i) => ({ id: `o${i}`, type: 't', delayMs: 0 })));
    const claimed = (await runClaim(redis, k, 300, 600_000, 0)).jobs;
    await runAck(redis, k, claimed.slice(0, 100).map((j) => ({ id: j.id, token: Number(j.record.split(',')[0]) })));
    expect(await redis.hlen(k.jobs)).toBe(200);
    expect(await redis.exists(k.records)).toBe(0);
    expect(await off.stats()).toMatchObject({ pending: 0, inFlight: 200 });
  });

  it('splits groups as the shard grows, every group a listpack, and finds every record', async () => {
    const { on, k } = queues('grow-many');
    const ids = Array.from({ length: 20_000 }, (_, i) => `order:${i.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000:expire`);
    for (let i = 0; i < ids.length; i += 1_000) {
      await on.scheduleMany(ids.slice(i, i + 1_000).map((id) => ({ id, type: 't', delayMs: 3_600_000, payload: {} })));
    }
    const state = await recordGroupsState(redis, k);
    expect(REC_LOAD).toBeGreaterThan(0);
    expect(state.count).toBe(20_000);
    // 20 000 records at no more than REC_LOAD a group on average.
    expect(2 ** state.level + state.split).toBeGreaterThanOrEqual(20_000 / REC_LOAD);
    const { problems, where } = await recordProblems(k);
    expect(problems).toEqual([]);
    expect(where.size).toBe(20_000);
    expect(await redis.exists(k.jobs)).toBe(0);
    const sizes = await Promise.all((await recordGroupKeys(redis, k)).map((key) => redis.hlen(key)));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(128);
    expect(await on.stats()).toMatchObject({ pending: 20_000 });
    expect((await on.cancel(ids[12_345]!)).cancelled).toBe(true);
    expect(await recordGroupsState(redis, k)).toMatchObject({ count: 19_999 });
  });
});

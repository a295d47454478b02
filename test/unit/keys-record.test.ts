import { describe, expect, it } from 'vitest';
import { shardKeys, shardOf } from '../../src/queue/keys.js';
import { parseRecord } from '../../src/queue/record.js';

describe('shard keys', () => {
  it('puts every key of a shard under one hash tag', () => {
    const k = shardKeys('dq', 'orders', 3);
    for (const key of [k.due, k.dueBuckets, k.seq, k.inflight, k.jobs, k.records, k.recordGroups, k.dead, k.errors]) {
      expect(key.startsWith('dq:{orders:3}:')).toBe(true);
    }
  });

  it('spreads ids over shards stably', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4_000; i++) {
      const s = shardOf(`order:${i}:expire`, 4);
      expect(shardOf(`order:${i}:expire`, 4)).toBe(s);
      counts[s] = (counts[s] ?? 0) + 1;
    }
    for (const c of counts) expect(c).toBeGreaterThan(800);
    expect(shardOf('anything', 1)).toBe(0);
  });
});

describe('job record', () => {
  it('parses a record whose payload holds commas and newlines', () => {
    const r = parseRecord('7,2,1764000000123,,order.expire,{"a":[1,2],"b":"x\ny"}');
    expect(r).toEqual({
      token: 7,
      attempts: 2,
      due: 1764000000123,
      maxAttempts: undefined,
      priority: 5,
      type: 'order.expire',
      payload: '{"a":[1,2],"b":"x\ny"}',
    });
    expect(parseRecord('0,0,5,3,t,null').maxAttempts).toBe(3);
  });

  it('reads the priority after maxAttempts, 5 when none is written', () => {
    expect(parseRecord('0,0,5,3p7,t,null')).toMatchObject({ maxAttempts: 3, priority: 7, type: 't' });
    expect(parseRecord('0,0,5,p0,t,null')).toMatchObject({ maxAttempts: undefined, priority: 0 });
    expect(parseRecord('0,0,5,37,t,null')).toMatchObject({ maxAttempts: 37, priority: 5 });
    expect(() => parseRecord('0,0,5,3p77,t,null')).toThrow(/corrupt/);
  });

  it('rejects a corrupt record', () => {
    expect(() => parseRecord('nonsense')).toThrow(/corrupt/);
  });
});

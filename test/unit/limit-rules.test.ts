// The queue limiter's rule syntax (QUEUE_RATE_LIMITS and the admin API share
// it): what it reads, what it refuses, and endpoint keys kept fit for a Redis key.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { bucketOf, normaliseEndpoint, parseLimit, parseRules } from '../../src/queue/limits/limit-rules.js';

describe('rate-limit rules', () => {
  it('reads queues, job types and endpoints with their intervals', () => {
    expect(parseRules('notifications=200/1s, notifications:notification.deliver=50/s,endpoint:webhook:api.example.com=1000/1m')).toEqual([
      { scope: 'notifications', count: 200, intervalMs: 1_000 },
      { scope: 'notifications:notification.deliver', count: 50, intervalMs: 1_000 },
      { scope: 'endpoint:webhook:api.example.com', count: 1_000, intervalMs: 60_000 },
    ]);
    expect(parseRules('')).toEqual([]);
    expect(parseLimit('5/250ms')).toEqual({ count: 5, intervalMs: 250 });
    expect(parseLimit('1/2h')).toEqual({ count: 1, intervalMs: 7_200_000 });
  });

  it.each([
    ['orders=0/1s', 'count'],
    ['orders=5', '<count>/<interval>'],
    ['orders=5/1d', '<count>/<interval>'],
    ['orders=5/25h', 'interval'],
    ['orders=2000/1ms', 'microsecond'],
    ['Orders=5/1s', 'queue name'],
    ['orders:bad type=5/1s', 'job type'],
    ['endpoint:{tag}=5/1s', 'endpoint'],
    ['orders=5/1s,orders=6/1s', 'twice'],
    ['orders', '"="'],
  ])('refuses %s', (text, why) => {
    expect(() => parseRules(text)).toThrow(why);
  });

  it('QUEUE_RATE_LIMITS is checked at start, naming the variable', () => {
    expect(loadConfig({ QUEUE_RATE_LIMITS: 'orders=5/1s' }).QUEUE_RATE_LIMITS).toEqual([{ scope: 'orders', count: 5, intervalMs: 1_000 }]);
    expect(() => loadConfig({ QUEUE_RATE_LIMITS: 'orders=5/1x' })).toThrow(ConfigError);
    expect(() => loadConfig({ QUEUE_RATE_LIMITS: 'orders=5/1x' })).toThrow(/QUEUE_RATE_LIMITS/);
  });

  it('keeps a fit endpoint key, hashes any other', () => {
    expect(normaliseEndpoint('webhook:api.example.com:8443')).toBe('webhook:api.example.com:8443');
    expect(normaliseEndpoint('nats:orders.>')).toBe('nats:orders.>');
    const odd = normaliseEndpoint('amqp:ex {with} spaces');
    expect(odd).toMatch(/^h:[0-9a-f]{32}$/);
    expect(normaliseEndpoint('amqp:ex {with} spaces')).toBe(odd);
    expect(normaliseEndpoint('x'.repeat(500))).toMatch(/^h:/);
  });

  it('a bucket never admits more than its count: the interval rounds up, the burst is a tenth', () => {
    expect(bucketOf('s', { count: 3, intervalMs: 1_000 })).toEqual({ scope: 's', intervalUs: 333_334, toleranceUs: 333_334 });
    expect(bucketOf('s', { count: 50, intervalMs: 1_000 })).toEqual({ scope: 's', intervalUs: 20_000, toleranceUs: 100_000 });
  });
});

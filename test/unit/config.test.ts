import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('config', () => {
  it('has defaults for everything optional', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      PORT: 3_000,
      REDIS_URL: 'redis://127.0.0.1:6379',
      LOG_LEVEL: 'info',
      QUEUE_SHARDS: 1,
      QUEUE_MAX_PAYLOAD_BYTES: 65_536,
      WORKER_LEASE_MS: 30_000,
      WORKER_IDLE_RECHECK_MS: 5_000,
    });
    expect(c.DATABASE_URL).toBeUndefined();
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '' }).PORT).toBe(3_000);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['REDIS_URL', 'http://localhost'],
    ['DATABASE_URL', 'mysql://x'],
    ['LOG_LEVEL', 'loud'],
    ['QUEUE_SHARDS', '0'],
    ['QUEUE_PREFIX', 'has space'],
    ['WORKER_LEASE_MS', '10'],
    ['REDIS_CLUSTER_NODES', 'host-without-port'],
    ['REDIS_CLUSTER_NODES', '127.0.0.1:7000,127.0.0.1:99999'],
    ['DAILY_REPORT_CRON', '0 2 * *x *'],
    ['DAILY_REPORT_CRON', '61 * * * *'],
    ['DAILY_REPORT_TIMEZONE', 'Mars/Olympus'],
  ])('names %s when it is %s', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name}: .*${JSON.stringify(value).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
  });

  it('parses cluster seed nodes', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,redis-b.internal:7001' }).REDIS_CLUSTER_NODES).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b.internal', port: 7001 },
    ]);
  });

  it('parses sentinels and refuses them beside cluster nodes', () => {
    expect(loadConfig({ REDIS_SENTINELS: '10.0.0.1:26379,s2:26380', REDIS_SENTINEL_NAME: 'orders-master' })).toMatchObject({
      REDIS_SENTINELS: [
        { host: '10.0.0.1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      REDIS_SENTINEL_NAME: 'orders-master',
    });
    expect(() => loadConfig({ REDIS_SENTINELS: 's1:26379', REDIS_CLUSTER_NODES: 'c1:7000' })).toThrow(
      /REDIS_SENTINELS: give REDIS_SENTINELS or REDIS_CLUSTER_NODES, not both/,
    );
  });

  // A webhook call longer than half a lease could let the lease run out mid-call
  // and another worker send the same notification again (review 2026-11-23, F10).
  it('refuses a webhook timeout of more than half the worker lease', () => {
    expect(() => loadConfig({ WORKER_LEASE_MS: '1500', NOTIFY_TIMEOUT_MS: '2000' })).toThrow(
      /NOTIFY_TIMEOUT_MS: must be at most half of WORKER_LEASE_MS \(1500\)/,
    );
    expect(loadConfig({ WORKER_LEASE_MS: '1500', NOTIFY_TIMEOUT_MS: '750' }).NOTIFY_TIMEOUT_MS).toBe(750);
  });

  // A bearer token is guessed offline from nothing: 32 characters, about 128 bits when random.
  it('refuses an admin or metrics token shorter than 32 characters, naming the variable and hiding the value', () => {
    for (const name of ['ADMIN_TOKEN', 'METRICS_TOKEN']) {
      const short = 'a'.repeat(31);
      expect(() => loadConfig({ [name]: short })).toThrow(new RegExp(`${name}: must be at least 32 characters.*got a value, hidden`));
      expect(() => loadConfig({ [name]: short })).not.toThrow(new RegExp(short));
      expect(loadConfig({ [name]: 'b'.repeat(32) })[name as 'ADMIN_TOKEN']).toBe('b'.repeat(32));
    }
  });

  it('keeps the metrics listener off the API port', () => {
    expect(loadConfig({}).METRICS_PORT).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: '9464' }).METRICS_PORT).toBe(9_464);
    expect(() => loadConfig({ PORT: '9464', METRICS_PORT: '9464' })).toThrow(/METRICS_PORT: must differ from PORT/);
    expect(() => loadConfig({ METRICS_HOST: '127.0.0.1' })).toThrow(/METRICS_HOST: is set without METRICS_PORT/);
    expect(loadConfig({}).PUBLIC_RATE_LIMIT_PER_SECOND).toBe(20);
  });

  // A dead job an operator may still redrive must find its row: history goes only after dead jobs do.
  it('keeps history longer than dead jobs, or not at all', () => {
    expect(loadConfig({}).RETENTION_DAYS).toBeUndefined();
    expect(() => loadConfig({ RETENTION_DAYS: '7' })).toThrow(/RETENTION_DAYS: must exceed QUEUE_DEAD_RETENTION_DAYS \(7\)/);
    expect(() => loadConfig({ RETENTION_DAYS: '10', QUEUE_DEAD_RETENTION_DAYS: '30' })).toThrow(/RETENTION_DAYS: must exceed/);
    expect(loadConfig({ RETENTION_DAYS: '8' }).RETENTION_DAYS).toBe(8);
    expect(() => loadConfig({ RETENTION_DAYS: '0' })).toThrow(/RETENTION_DAYS/);
    expect(() => loadConfig({ RETENTION_DAYS: '10', APPOINTMENT_RECONCILE_AFTER_START_SECONDS: '864000' })).toThrow(
      /RETENTION_DAYS: must exceed APPOINTMENT_RECONCILE_AFTER_START_SECONDS \(864000 s\)/,
    );
  });
});

describe('config secrets', () => {
  const admin = 'a'.repeat(40);
  it.each([
    ['ADMIN_TOKEN', 'change-me-to-a-real-admin-token-0123456789', 'is a placeholder'],
    ['NOTIFY_WEBHOOK_SECRET', 'change-me-webhook-secret', 'is a placeholder'],
    ['DATABASE_URL', 'postgresql://orders_app:change-me-app-password@postgres:5432/orders', 'has a password that is a placeholder'],
    ['REDIS_URL', 'redis://:change-me-redis-password@redis:6379', 'has a password that is a placeholder'],
    ['REDIS_URL', 'redis://:Change-Me-Later@redis:6379', 'has a password that is a placeholder'],
  ])('refuses %s holding a change-me placeholder, naming the variable and not the value', (name, value, says) => {
    const env = { NOTIFY_WEBHOOK_URL: 'https://hooks.example/n', ADMIN_TOKEN: admin, [name]: value };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`${name}: ${says} \\(change-me\\.\\.\\.\\)`));
    expect(() => loadConfig(env)).not.toThrow(new RegExp(value.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')));
  });

  it('takes real secrets, and a password that only mentions change-me', () => {
    expect(loadConfig({ REDIS_URL: 'redis://:not-change-me@redis:6379', ADMIN_TOKEN: admin }).ADMIN_TOKEN).toBe(admin);
    expect(loadConfig({ DATABASE_URL: 'postgresql://orders_app@postgres:5432/orders' }).DATABASE_URL).toBeDefined();
  });

  it('reports a placeholder beside the other bad values', () => {
    expect(() => loadConfig({ PORT: 'abc', REDIS_URL: 'redis://:change-me@redis:6379' })).toThrow(/PORT: [^]*REDIS_URL: has a password that is a placeholder/);
  });

  it('masks a password holding a raw @ whole, with the URL parser', () => {
    // A bad scheme, so the URL is shown in the error: its password must not be.
    const err = (() => {
      try {
        loadConfig({ DATABASE_URL: 'mysql://orders:p@ss@word@db.example:5432/orders' });
      } catch (e) {
        return String(e);
      }
      return '';
    })();
    expect(err).toMatch(/DATABASE_URL: .*\(got "mysql:\/\/orders:\*\*\*@db\.example:5432\/orders"\)/);
    expect(err).not.toMatch(/ss|word/);
  });
});

// Which database errors count as "the database is not there" (503, job retried).
import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, isUniqueViolation } from '../../src/core/db-errors.js';

describe('isDatabaseUnavailable', () => {
  it.each([
    // pg, unwrapped, when a connection broke under a transaction (met by the PostgreSQL-outage chaos scenario)
    'Client has encountered a connection error and is not queryable',
    'Client was closed and is not queryable',
    // pg-pool when no connection could be opened within connectionTimeoutMillis
    'timeout exceeded when trying to connect',
    'Connection terminated unexpectedly',
    'connect ECONNREFUSED 127.0.0.1:5432',
  ])('recognises "%s"', (message) => {
    expect(isDatabaseUnavailable(new Error(message))).toBe(true);
  });

  it.each(['DatabaseNotReachable', 'ConnectionClosed'])('recognises a Prisma raw query error whose driver adapter says %s', (kind) => {
    const err = Object.assign(new Error('Raw query failed.'), { code: 'P2010', meta: { driverAdapterError: { cause: { kind } } } });
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('recognises the driver adapter error itself and a transaction that could not start in time', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('ConnectionClosed'), { name: 'DriverAdapterError' }))).toBe(true);
    const p2028 = Object.assign(new Error('Transaction API error: Unable to start a transaction in the given time.'), { code: 'P2028', meta: {} });
    expect(isDatabaseUnavailable(p2028)).toBe(true);
  });

  it('does not take other errors for an outage', () => {
    expect(isDatabaseUnavailable(new Error('syntax error at or near "SELEC"'))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('Unique constraint failed'), { code: 'P2002' }))).toBe(false);
    expect(isUniqueViolation(Object.assign(new Error('Unique constraint failed'), { code: 'P2002' }))).toBe(true);
  });
});

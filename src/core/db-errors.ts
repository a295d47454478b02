// Recognising database errors that are not bugs: a unique-key race (handled by
// the caller) and an unreachable database (answered 503, retried by jobs).

function fields(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as Error & { code?: unknown; meta?: unknown; cause?: unknown };
  const meta = plain(e.meta);
  // The driver adapter's own error (thrown as such inside interactive
  // transactions) carries the PostgreSQL code in a plain-object cause.
  return `${String(e.code ?? '')} ${e.message} ${meta} ${e.cause instanceof Error ? fields(e.cause) : plain(e.cause)}`;
}

function plain(value: unknown): string {
  try {
    return JSON.stringify(value ?? '');
  } catch {
    return ''; // circular: the message and code are enough
  }
}

export function isUniqueViolation(err: unknown): boolean {
  return /\bP2002\b|23505|UniqueConstraintViolation|unique constraint/i.test(fields(err));
}

/** A statement of a REPEATABLE READ transaction met a row changed after its snapshot (or a deadlock): it may be made again. */
export function isSerializationFailure(err: unknown): boolean {
  return /\bP2034\b|40001|40P01|TransactionWriteConflict|could not serialize access|deadlock detected/i.test(fields(err));
}

// Besides Prisma's codes: the driver adapter's ConnectionClosed ("Server has
// closed the connection", as such or wrapped in P2010); pg's own wording for a
// connection that broke under a transaction ("... is not queryable") and for a
// pool that could not connect in time, which arrive unwrapped and without a
// code; and a transaction that got no connection within its wait (P2028).
export function isDatabaseUnavailable(err: unknown): boolean {
  return /\bP1001\b|\bP1002\b|\bP1017\b|\bP2024\b|ECONNREFUSED|ECONNRESET|Connection terminated|connection timeout|DatabaseNotReachable|ConnectionClosed|57P01|57P03|too many clients|is not queryable|timeout exceeded when trying to connect|Unable to start a transaction in the given time/i.test(
    fields(err),
  );
}

// The job ids the domains make from a row's id: `<kind>:<uuid>:<action>`
// (order:<id>:expire, appointment:<id>:remind, notification:<id>:deliver).
// A handler reads the row back from the job id, so the shape is built and
// parsed in one place.

export type RowJobId = {
  /** The job id of the row `rowId`. */
  readonly of: (rowId: string) => string;
  /** The row a job id of this shape names; null for any other id. */
  readonly rowOf: (jobId: string) => string | null;
};

/**
 * `anyCase`: also read upper-case hex (ids a client sent, as PostgreSQL takes
 * either); without it only the lower case PostgreSQL prints.
 */
export function rowJobId(kind: string, action: string, opts: { anyCase?: boolean } = {}): RowJobId {
  const h = opts.anyCase ? '[0-9a-fA-F]' : '[0-9a-f]';
  const pattern = new RegExp(`^${kind}:(${h}{8}-${h}{4}-${h}{4}-${h}{4}-${h}{12}):${action}$`);
  return { of: (rowId) => `${kind}:${rowId}:${action}`, rowOf: (jobId) => pattern.exec(jobId)?.[1] ?? null };
}

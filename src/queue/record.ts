// The job record stored in the jobs HASH: "token,attempts,due,maxAttempts,type,payload",
// maxAttempts followed by "p<priority>" when the priority is not the default.
// Numbers first and the payload last so Lua can parse it with one pattern;
// job types never contain a comma (see JOB_TYPE_PATTERN). Kept short on
// purpose: it is paid for once per pending job.

export type JobRecord = {
  /** The current delivery's fencing token (unique per claim: lua/queue/claim.lua), 0 when not in flight. */
  readonly token: number;
  /** Deliveries so far (a claim counts one). */
  readonly attempts: number;
  /**
   * Due time (ms since epoch) of the job's place in the due index while it is
   * pending (lua/lib/due-index.lua finds its bucket by it); of its latest
   * delivery while it is in flight or dead.
   */
  readonly due: number;
  /** Per-job override of the type's max attempts, or undefined. */
  readonly maxAttempts: number | undefined;
  /** 0..9, higher claimed first among due jobs (lua/lib/due-index.lua); DEFAULT_PRIORITY when the record names none. */
  readonly priority: number;
  readonly type: string;
  /** JSON text. */
  readonly payload: string;
};

export const JOB_TYPE_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * The last error claim.lua writes for a record it cannot read when it parks it
 * in the dead set (lua/lib/record.lua). Such a record is unreadable in every layout.
 */
export const CORRUPT_RECORD_ERROR = 'corrupt job record';

/**
 * A job's priority when none is given: its record then carries none, so a
 * default job costs what it did before priorities, and it waits in the due
 * index's default lane, the keys of that time (lua/lib/due-index.lua).
 */
export const DEFAULT_PRIORITY = 5;
export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 9;

// The same rule as lua/lib/record.lua's RECORD_HEAD ("%d*p?%d?" for the
// fourth field), so both sides agree on what is readable.
const RECORD = /^(\d+),(\d+),(\d+),(\d*)p?(\d?),([^,]*),([\s\S]*)$/;

export function parseRecord(text: string): JobRecord {
  const m = RECORD.exec(text);
  if (!m) throw new Error(`corrupt job record: ${text.slice(0, 80)}`);
  return {
    token: Number(m[1]),
    attempts: Number(m[2]),
    due: Number(m[3]),
    maxAttempts: m[4] === '' ? undefined : Number(m[4]),
    priority: m[5] === '' || m[5] === undefined ? DEFAULT_PRIORITY : Number(m[5]),
    type: m[6] ?? '',
    payload: m[7] ?? '',
  };
}

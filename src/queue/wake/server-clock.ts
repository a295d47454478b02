// Estimates the Redis server clock from the local monotonic clock, using the
// TIME each claim returns. Only used to turn an absolute due time announced on
// Pub/Sub into a local timer; every due and lease decision is made in Redis.

export type ServerClock = {
  /**
   * Record a sample: server time `serverMs` seen by a call sent at t0 and
   * answered at t1 (local ms). `force` takes it even over a faster recent
   * one: the estimate was found wrong (the server's clock moved, as after a
   * failover to another host, or a late answer). A forced sample puts the
   * server's time at t1, the latest it can have been read: the estimate errs
   * behind, never ahead (a late answer came from a server that held the call
   * for most of its round trip, and an estimate ahead would give the next
   * call a deadline later than its caller waits).
   */
  sample(serverMs: number, t0: number, t1: number, force?: boolean): void;
  /** Local monotonic ms at which the server clock reads `serverMs`. */
  localAt(serverMs: number): number;
  /** Current server time estimate (ms since epoch, fractional). */
  now(): number;
};

export const localNow = (): number => performance.now();

// A sample taken over a slow round trip can be off by half of it; the offset
// follows the fastest recent sample and is refreshed at least this often.
const SAMPLE_MAX_AGE_MS = 30_000;

export function createServerClock(): ServerClock {
  // server = local + offset. Start from the wall clock; claims refine it.
  let offset = performance.timeOrigin;
  let bestRtt = Number.POSITIVE_INFINITY;
  let bestAt = Number.NEGATIVE_INFINITY;
  return {
    sample(serverMs, t0, t1, force = false) {
      const rtt = t1 - t0;
      if (!force && rtt > bestRtt * 1.5 + 0.2 && t1 - bestAt < SAMPLE_MAX_AGE_MS) return;
      // TIME is truncated to the ms by the scripts: +0.5 centres it.
      offset = force ? serverMs - t1 : serverMs + 0.5 - (t0 + t1) / 2;
      bestRtt = rtt;
      bestAt = t1;
    },
    localAt: (serverMs) => serverMs - offset,
    now: () => localNow() + offset,
  };
}

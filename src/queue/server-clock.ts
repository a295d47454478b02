// Estimates the Redis server clock from the local monotonic clock, using the
// TIME each claim returns. Only used to turn an absolute due time announced on
// Pub/Sub into a local timer; every due and lease decision is made in Redis.

export type ServerClock = {
  /** Record a sample: server time `serverMs` seen by a call sent at t0 and answered at t1 (local ms). */
  sample(serverMs: number, t0: number, t1: number): void;
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
    sample(serverMs, t0, t1) {
      const rtt = t1 - t0;
      if (rtt > bestRtt * 1.5 + 0.2 && t1 - bestAt < SAMPLE_MAX_AGE_MS) return;
      // TIME is truncated to the ms by the scripts: +0.5 centres it.
      offset = serverMs + 0.5 - (t0 + t1) / 2;
      bestRtt = rtt;
      bestAt = t1;
    },
    localAt: (serverMs) => serverMs - offset,
    now: () => localNow() + offset,
  };
}

// Retry spacing: exponential with jitter, or an explicit list of steps
// (e.g. a third party's 5 s, 10 s, 30 s, 60 s).

export type BackoffPolicy =
  | { readonly kind: 'exponential'; readonly baseMs: number; readonly maxMs: number; readonly jitter: number }
  | { readonly kind: 'steps'; readonly delaysMs: readonly number[]; readonly jitter: number };

export const DEFAULT_BACKOFF: BackoffPolicy = { kind: 'exponential', baseMs: 1_000, maxMs: 10 * 60_000, jitter: 0.2 };

/**
 * Delay before the next attempt after `attempts` deliveries failed (attempts >= 1).
 * Jitter spreads retries of jobs that failed together ("thundering herd"):
 * the delay is scaled by a random factor in [1 - jitter, 1].
 */
export function retryDelayMs(policy: BackoffPolicy, attempts: number, random: () => number = Math.random): number {
  const n = Math.max(1, attempts);
  let delay: number;
  if (policy.kind === 'steps') {
    const steps = policy.delaysMs;
    delay = steps.length === 0 ? 0 : (steps[Math.min(n, steps.length) - 1] ?? 0);
  } else {
    delay = Math.min(policy.maxMs, policy.baseMs * 2 ** (n - 1));
  }
  return Math.round(delay * (1 - policy.jitter * random()));
}

// Bounds a promise in time: the guard against a connection that died without
// closing, where a reply would otherwise be awaited forever.

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

export function withTimeout<T>(p: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

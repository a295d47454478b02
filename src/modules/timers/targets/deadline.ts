// Bounds a broker send by its timeout and the caller's AbortSignal. Either
// firing first leaves the outcome unknown (the broker may still confirm), so
// both end in a plain, retryable Error: the message id lets the broker or the
// receiver drop the repeat.

/**
 * Runs `work` and settles with it, or rejects with `Error(timeoutMessage)`
 * after `ms`, or with the signal's reason when it aborts, whichever comes
 * first. `work` is not started when the signal has already aborted; a late
 * outcome of `work` is dropped.
 */
export function withDeadline<T>(work: () => Promise<T>, ms: number, signal: AbortSignal, timeoutMessage: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => finish(() => reject(abortError(signal)));
    const timer = setTimeout(() => finish(() => reject(new Error(timeoutMessage))), ms);
    let settled = false;
    function finish(settle: () => void): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      settle();
    }
    signal.addEventListener('abort', onAbort, { once: true });
    work().then(
      (value) => finish(() => resolve(value)),
      (err: unknown) => finish(() => reject(err instanceof Error ? err : new Error(String(err)))),
    );
  });
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('send aborted');
}

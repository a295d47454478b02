// Gathers the calls made in one event-loop turn into one batch call. Under load
// many requests then share one round trip (one SQL statement, one script call)
// instead of paying one each, which on a machine where every socket write
// costs tens of microseconds is most of the work; a lone call waits only for
// the end of the current turn (setImmediate), not for a timer.

/** What a batch call answers for each item, in order. */
export type Settled<O> = { readonly ok: true; readonly value: O } | { readonly ok: false; readonly error: unknown };

export type Gatherer<I, O> = { submit(item: I): Promise<O> };

type Waiting<I, O> = { item: I; resolve: (v: O) => void; reject: (e: unknown) => void };

/**
 * `run` gets up to `maxBatch` items and answers one Settled per item, in order;
 * if it throws, every item of its batch fails with that error.
 */
export function createGatherer<I, O>(run: (items: readonly I[]) => Promise<readonly Settled<O>[]>, maxBatch: number): Gatherer<I, O> {
  let waiting: Waiting<I, O>[] = [];
  let planned = false;

  function flush(): void {
    planned = false;
    const all = waiting;
    waiting = [];
    for (let i = 0; i < all.length; i += maxBatch) void runBatch(all.slice(i, i + maxBatch));
  }

  async function runBatch(batch: Waiting<I, O>[]): Promise<void> {
    let answers: readonly Settled<O>[];
    try {
      answers = await run(batch.map((w) => w.item));
      if (answers.length !== batch.length) throw new Error(`batch call answered ${answers.length} of ${batch.length} items`);
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    batch.forEach((w, i) => {
      const a = answers[i] as Settled<O>;
      if (a.ok) w.resolve(a.value);
      else w.reject(a.error);
    });
  }

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (!planned) {
          planned = true;
          setImmediate(flush);
        }
      });
    },
  };
}

/**
 * Gathers the calls of one turn by key: one batch call per key (`run`: an
 * answer per item, in order; it must not throw), up to `maxBatch` items each,
 * started in the order the keys were first asked. Each key's callers are
 * answered when its own call is, not held for another key's.
 */
export function createKeyedGatherer<I, O>(run: (key: string, items: readonly I[]) => Promise<readonly O[]>, maxBatch: number) {
  let waiting = new Map<string, { item: I; resolve: (v: O) => void }[]>();
  let planned = false;

  function flush(): void {
    planned = false;
    const all = waiting;
    waiting = new Map();
    for (const [key, ws] of all) for (let i = 0; i < ws.length; i += maxBatch) void runBatch(key, ws.slice(i, i + maxBatch));
  }

  async function runBatch(key: string, batch: { item: I; resolve: (v: O) => void }[]): Promise<void> {
    const answers = await run(
      key,
      batch.map((w) => w.item),
    );
    batch.forEach((w, i) => w.resolve(answers[i] as O));
  }

  return {
    submit(key: string, item: I): Promise<O> {
      return new Promise<O>((resolve) => {
        const ws = waiting.get(key);
        if (ws) ws.push({ item, resolve });
        else waiting.set(key, [{ item, resolve }]);
        if (!planned) {
          planned = true;
          setImmediate(flush);
        }
      });
    },
  };
}

/**
 * Gathers calls into one batch call (`many`: an answer per item, in order).
 * A batch call that fails as a whole is made again item by item (`one`), so
 * an item the statement cannot take fails alone, unless `whole(err)` says the
 * failure was not the items' (the database is not there at all) or the batch
 * held one item.
 */
export function gatherOrEach<I, O>(
  many: (items: readonly I[]) => Promise<readonly O[]>,
  one: (item: I) => Promise<O>,
  o: { maxBatch: number; whole: (err: unknown) => boolean },
): Gatherer<I, O> {
  return createGatherer<I, O>(async (items) => {
    try {
      return (await many(items)).map((value) => ({ ok: true, value }));
    } catch (err) {
      if (items.length === 1 || o.whole(err)) throw err;
      return settleEach(items, one);
    }
  }, o.maxBatch);
}

/** Settles every item with the same outcome of one call per item (the fallback when a batch call fails as a whole). */
export async function settleEach<I, O>(items: readonly I[], one: (item: I) => Promise<O>): Promise<Settled<O>[]> {
  return Promise.all(
    items.map((item) =>
      one(item).then(
        (value): Settled<O> => ({ ok: true, value }),
        (error: unknown): Settled<O> => ({ ok: false, error }),
      ),
    ),
  );
}

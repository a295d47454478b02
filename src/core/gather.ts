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
 * The turn planning both gatherers share: the items submitted in one turn,
 * by key, go to `run` at the end of the turn (setImmediate), up to
 * `maxBatch` a call, keys in the order they were first asked. Each caller
 * gets its answer through `answer`; if the call throws, or its answers do
 * not pass `checked`, every caller of that batch fails with the error.
 */
function gatherTurns<I, O, A>(
  run: (key: string, items: readonly I[]) => Promise<readonly A[]>,
  answer: (w: Waiting<I, O>, a: A) => void,
  o: { maxBatch: number; settled: boolean },
) {
  const { maxBatch } = o;
  if (!Number.isInteger(maxBatch) || maxBatch < 1) throw new Error(`a gatherer's batch limit must be a whole number >= 1 (got ${maxBatch})`);
  let waiting = new Map<string, Waiting<I, O>[]>();
  let planned = false;

  function flush(): void {
    planned = false;
    const all = waiting;
    waiting = new Map();
    for (const [key, ws] of all) for (let i = 0; i < ws.length; i += maxBatch) void runBatch(key, ws.slice(i, i + maxBatch));
  }

  async function runBatch(key: string, batch: Waiting<I, O>[]): Promise<void> {
    let answers: readonly A[];
    try {
      answers = checked(
        await run(
          key,
          batch.map((w) => w.item),
        ),
        batch.length,
        o.settled,
      );
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    batch.forEach((w, i) => answer(w, answers[i] as A));
  }

  return (key: string, item: I): Promise<O> =>
    new Promise<O>((resolve, reject) => {
      const ws = waiting.get(key);
      if (ws) ws.push({ item, resolve, reject });
      else waiting.set(key, [{ item, resolve, reject }]);
      if (!planned) {
        planned = true;
        setImmediate(flush);
      }
    });
}

/**
 * A batch call's answers, refused unless there is one for each item (a caller
 * left without one would wait for ever); with `settled`, each an object (a
 * Settled), none left out.
 */
function checked<A>(answers: readonly A[], items: number, settled: boolean): readonly A[] {
  if (!Array.isArray(answers)) throw new Error('batch call answered no list');
  if (answers.length !== items) throw new Error(`batch call answered ${answers.length} of ${items} items`);
  for (let i = 0; settled && i < items; i++)
    if (typeof answers[i] !== 'object' || answers[i] === null) throw new Error(`batch call left item ${i} without an answer`);
  return answers;
}

/**
 * `run` gets up to `maxBatch` items and answers one Settled per item, in order;
 * if it throws, every item of its batch fails with that error.
 */
export function createGatherer<I, O>(run: (items: readonly I[]) => Promise<readonly Settled<O>[]>, maxBatch: number): Gatherer<I, O> {
  const submit = gatherTurns<I, O, Settled<O>>(
    (_key, items) => run(items),
    (w, a) => (a.ok ? w.resolve(a.value) : w.reject(a.error)),
    { maxBatch, settled: true },
  );
  return { submit: (item) => submit('', item) };
}

/**
 * Gathers the calls of one turn by key: one batch call per key (`run`: an
 * answer per item, in order; if it throws, its batch's callers fail with
 * that error), up to `maxBatch` items each,
 * started in the order the keys were first asked. Each key's callers are
 * answered when its own call is, not held for another key's.
 */
export function createKeyedGatherer<I, O>(run: (key: string, items: readonly I[]) => Promise<readonly O[]>, maxBatch: number) {
  const submit = gatherTurns<I, O, O>(run, (w, a) => w.resolve(a), { maxBatch, settled: false });
  return { submit };
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

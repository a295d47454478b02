// Runs a domain's model-based suite: fast-check generates command sequences
// (client operations, time steps, receiver behaviours, faults), runs each
// against the world and the model, settles, then compares the three views
// (database, receiver, model). A failure shrinks to a minimal sequence and
// prints the seed and path that replay it.
//
// Runs and commands per configuration: MODEL_RUNS (default: the suite's CI
// count), MODEL_COMMANDS (most commands per run), MODEL_SEED, MODEL_PATH and
// MODEL_REPLAY (replay a failure: the seed, the path and the replayPath of
// the printed counterexample), MODEL_RANDOM_SEED=1 (a new draw: the soak),
// MODEL_FAULTS=0 (client operations and time only), MODEL_TIME_LIMIT_MS (a
// suite stops there, as failed; default 20 minutes: raise it for a long soak).
// The summary line of each suite says how many runs it covered, its steps
// (operations) and, apart, its client operations by step, its faults and how
// often each excuse rule fired (each firing is also logged as it happens).
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import {
  FAULT_KINDS,
  type FaultKind,
  MODEL_ADMIN_TOKEN,
  MODEL_TIMINGS,
  RECEIVER_KINDS,
  type ReceiverKind,
  type RunLog,
  type World,
  mayHaveTimedOut,
} from './world.js';
import type { Reply } from '../chaos/drivers/http.js';

// Clocks meet in every suite's rules (this process's, PostgreSQL's, Redis's,
// one host) and a request's moment in the database lies between its send and
// its answer: the tolerance the rules allow.
export const EPS_MS = 100;
/** How long a suite waits at the end of a run for what it owes to settle. */
export const SETTLE_MS = 60_000;

/** A step's request answered otherwise than it must: the run fails with the answer. */
export function fail(what: string, r: Reply): never {
  throw new Error(`${what}: answered ${r.status} ${JSON.stringify(r.body)}`);
}

export type Real = { world: World; run: RunLog; tag: string };

/** An operator's request to the admin API (`path` under /admin/queues/). */
export function admin(r: Real, method: 'GET' | 'POST' | 'DELETE', path: string): Promise<Reply> {
  return r.world.http.send(method, `/admin/queues/${path}`, undefined, { authorization: `Bearer ${MODEL_ADMIN_TOKEN}` });
}

/** How long after a call's answer its worker may still be recording the outcome (the mark's retries and lease renewals). */
const RECORDING_MS = 2_000;

/**
 * The fault that may have cut the worker off between `call` (answered at
 * `answeredAt`, or never) and the record of its outcome, so that the outcome
 * is unknown and the call is made again: a worker killed (or stopped, its
 * grace ending) from the call's start to its record, or an outcome kept in a
 * job Redis then lost. Null when
 * none did: a call made again after it is the code's.
 */
export function cutOffBy(r: Real, call: { at: number; answeredAt?: number | undefined }): string | null {
  const answered = call.answeredAt ?? call.at + MODEL_TIMINGS.NOTIFY_TIMEOUT_MS;
  const ended = r.run.faultSpans.find((f) => (f.kind === 'killWorker' || f.kind === 'stopWorker') && f.from >= call.at && f.from <= answered + RECORDING_MS);
  // A stopped worker's call still running when the shutdown grace ends is cut off too, its outcome unrecorded.
  if (ended) return ended.kind === 'killWorker' ? 'worker killed during its call' : 'worker stopped during its call';
  if (keptOutcomeLost(r, answered)) return 'kept outcome lost';
  return null;
}

/** Each world's answer to a request for an id nothing has, by request ('get', 'pay', ...): its status and body, the id taken out. */
const unknownAnswers = new WeakMap<World, Map<string, string>>();

/** An answer's status and body with `id` taken out wherever it is named: answers about two ids compared as one. */
const withoutId = (res: Reply, id: string) => `${res.status} ${JSON.stringify(res.body).replaceAll(id, '<id>')}`;

/**
 * Holds another client's request `what` for the object `id` (`send`: that
 * request for a given id) to the rule that no effect crosses clients:
 * answered as `expected` says, and exactly as the same request for an id
 * nothing has (the same status and body but for the id), so the answer gives
 * no sign that the object exists. `by` names the request in a failure.
 */
export async function answeredAsUnknown(
  r: Real,
  what: string,
  by: string,
  id: string,
  send: (id: string) => Promise<Reply>,
  expected: (res: Reply) => boolean,
): Promise<void> {
  const res = await send(id);
  if (!expected(res)) fail(by, res);
  const known = unknownAnswers.get(r.world) ?? new Map<string, string>();
  unknownAnswers.set(r.world, known);
  let unknown = known.get(what);
  if (unknown === undefined) {
    const other = randomUUID();
    unknown = withoutId(await send(other), other);
    known.set(what, unknown);
  }
  if (withoutId(res, id) !== unknown) fail(`${by}: not the answer to an unknown id (${unknown})`, res);
}

/** Notes that an excuse rule accepted what a rule forbids: logged, and counted in the suite's summary. */
export function excuse(r: Real, cause: string, what: string): void {
  r.run.excused[cause] = (r.run.excused[cause] ?? 0) + 1;
  console.log(`model run ${r.tag}: excused (${cause}): ${what}`);
}

/**
 * Whether the receiver taking notification `n` and being called again after
 * is explained, call by call: each call after its first success must follow a
 * success of its own that was cut off (cutOffBy: the fault struck that call),
 * or one answered slowly enough to reach the service after its timeout, which
 * then recorded it as a failed attempt (its attempts cover every call). A
 * success answered at once and recorded as a failure (a wrong reading of an
 * answer) is never excused, nor is a second call of a row while its first
 * ran. Each excuse is logged and counted.
 */
export function repeatExplained(r: Real, n: { id: string; attempts: number }): boolean {
  const calls = r.world.webhook.calls.filter((c) => c.body.id === n.id).sort((a, b) => a.at - b.at);
  const taken = new Set(r.world.webhook.delivered.filter((c) => c.body.id === n.id));
  const causes: string[] = [];
  for (const c of calls) {
    const before = calls.filter((d) => d.at < c.at && taken.has(d)).at(-1);
    if (!before) continue;
    const cause = cutOffBy(r, before) ?? (mayHaveTimedOut(before) && n.attempts >= calls.length ? 'slow success taken for a timeout' : null);
    if (cause === null) return false;
    causes.push(cause);
  }
  for (const cause of causes) excuse(r, cause, `notification ${n.id} called again after the receiver took it`);
  return true;
}

/**
 * The outcome of a call answered at `at` (a success's SENT mark, a refusal)
 * may have been kept in its delivery job, and that job lost: the database
 * would not take the record then (an outage or terminated connections from
 * up to 2 s before the answer, the record's retries, to the fault's end), the
 * job was replaced by one that keeps it some 1.5-2.5 s after the answer, and a
 * Redis restart losing its last second of writes began within 5 s of the
 * answer. The job comes back blind and calls again (docs/guarantees.md, "What does not
 * hold"; parcels soak seed 325090691: two batch notices kept during a
 * pgOutage, Redis restarted 0.8 s later).
 */
export function keptOutcomeLost(r: Real, at: number): boolean {
  const spans = r.run.faultSpans;
  const dbAway = spans.some((f) => (f.kind === 'pgOutage' || f.kind === 'terminatePg') && at >= f.from - 2_000 && at <= f.to);
  return dbAway && spans.some((f) => f.kind === 'restartRedis' && f.from >= at && f.from <= at + 5_000);
}

/** A command of a domain suite: `act` does it to the world and checks the answers against the model. */
export abstract class Step<M extends object> implements fc.AsyncCommand<M, Real> {
  abstract act(m: M, r: Real): Promise<void>;
  abstract toString(): string;
  check(_m: Readonly<M>): boolean {
    return true;
  }
  /** A request to the service (a client's or an operator's), counted apart from waits, receiver changes and faults. */
  readonly client: boolean = true;
  async run(m: M, r: Real): Promise<void> {
    r.run.operations++;
    if (this.client) {
      const name = this.constructor.name;
      r.run.client[name] = (r.run.client[name] ?? 0) + 1;
    }
    await this.act(m, r);
  }
}

/** A step on one element of a list of the model: drawn as a number, taken modulo the list's length; never drawn while the list is empty. */
export abstract class OnPick<M extends object, T> extends Step<M> {
  constructor(readonly pick: number) {
    super();
  }
  protected abstract list(m: Readonly<M>): readonly T[];
  override check(m: Readonly<M>) {
    return this.list(m).length > 0;
  }
  protected picked(m: M): T {
    const list = this.list(m);
    return list[this.pick % list.length] as T;
  }
}

export class Wait<M extends object> extends Step<M> {
  override readonly client = false;
  constructor(readonly ms: number) {
    super();
  }
  async act(): Promise<void> {
    await new Promise((res) => setTimeout(res, this.ms));
  }
  toString() {
    return `Wait(${this.ms})`;
  }
}

export class Receiver<M extends object> extends Step<M> {
  override readonly client = false;
  constructor(readonly kind: ReceiverKind) {
    super();
  }
  async act(_m: M, r: Real): Promise<void> {
    r.world.receiver(this.kind);
  }
  toString() {
    return `Receiver(${this.kind})`;
  }
}

export class Fault<M extends object> extends Step<M> {
  override readonly client = false;
  constructor(readonly kind: FaultKind) {
    super();
  }
  async act(_m: M, r: Real): Promise<void> {
    await r.world.fault(this.kind, r.run);
  }
  toString() {
    return `Fault(${this.kind})`;
  }
}

/** Time steps around the runs' deadlines (payment windows of 1-2 s, remind times, the 1.5 s parcel wait). */
export function waits<M extends object>(): fc.Arbitrary<Step<M>> {
  return fc.oneof(fc.integer({ min: 10, max: 300 }), fc.integer({ min: 300, max: 1_600 })).map((ms) => new Wait<M>(ms));
}

export function receivers<M extends object>(kinds: readonly ReceiverKind[] = RECEIVER_KINDS.filter((k) => k !== 'reject')): fc.Arbitrary<Step<M>> {
  return fc.constantFrom(...kinds).map((k) => new Receiver<M>(k));
}

export function faults<M extends object>(): fc.Arbitrary<Step<M>> {
  return fc.constantFrom(...FAULT_KINDS).map((k) => new Fault<M>(k));
}

/** The faults a During step strikes a request with: those whose requests are answered again within a second or so. */
const DURING_KINDS = ['killWorker', 'stopWorker', 'terminatePg', 'restartRedis'] as const satisfies readonly FaultKind[];

/** A fault that strikes `delayMs` after a client operation started, while its requests are in flight. */
export class During<M extends object> extends Step<M> {
  override readonly client = false;
  constructor(
    readonly fault: Fault<M>,
    readonly op: Step<M>,
    readonly delayMs: number,
  ) {
    super();
  }
  override check(m: Readonly<M>) {
    return this.op.check(m);
  }
  // Counted as its operation and its fault, not a step of its own.
  override async run(m: M, r: Real): Promise<void> {
    await this.act(m, r);
  }
  async act(m: M, r: Real): Promise<void> {
    const fault = new Promise((res) => setTimeout(res, this.delayMs)).then(() => this.fault.run(m, r));
    await Promise.all([this.op.run(m, r), fault]);
  }
  toString() {
    return `During(${this.fault}, ${this.op}, after ${this.delayMs} ms)`;
  }
}

function during<M extends object>(operations: fc.Arbitrary<Step<M>>): fc.Arbitrary<Step<M>> {
  return fc
    .tuple(fc.constantFrom(...DURING_KINDS), operations, fc.integer({ min: 0, max: 150 }))
    .map(([k, op, delayMs]) => new During<M>(new Fault<M>(k), op, delayMs));
}

export type SuiteOptions<M extends object> = {
  name: string;
  world: () => World;
  /** Client operations of the domain (weighted by the caller). */
  operations: fc.Arbitrary<Step<M>>;
  /** How the receiver may answer (default: all but refusing as malformed, which ends a notification FAILED). */
  receiverKinds?: readonly ReceiverKind[];
  newModel: () => M;
  /** Waits for the run's entities to end, then compares database, receiver and model; throws what disagrees. */
  settleAndCheck: (m: M, r: Real) => Promise<Record<string, number>>;
  runs: number;
  maxCommands: number;
};

export type SuiteSummary = {
  suite: string;
  runs: number;
  /** Every step, waits, receiver changes and faults included. */
  operations: number;
  /** Requests to the service only, in all and by step. */
  clientOperations: number;
  client: Record<string, number>;
  faults: Partial<Record<FaultKind, number>>;
  /** How often each excuse rule fired. */
  excused: Record<string, number>;
  checked: Record<string, number>;
  seed: number;
};

const envInt = (name: string): number | undefined => (process.env[name] ? Number(process.env[name]) : undefined);

/** Runs the suite's property; returns what it covered. Throws fast-check's report (seed, path, shrunk commands) on a counterexample. */
export async function runSuite<M extends object>(o: SuiteOptions<M>): Promise<SuiteSummary> {
  const withFaults = process.env.MODEL_FAULTS !== '0';
  const step = fc.oneof(
    { weight: 8, arbitrary: o.operations },
    { weight: 3, arbitrary: waits<M>() },
    { weight: 1, arbitrary: receivers<M>(o.receiverKinds) },
    ...(withFaults
      ? [
          { weight: 1, arbitrary: faults<M>() },
          { weight: 1, arbitrary: during<M>(o.operations) },
        ]
      : []),
  );
  const replayPath = process.env.MODEL_REPLAY;
  const commands = fc.commands([step], { maxCommands: envInt('MODEL_COMMANDS') ?? o.maxCommands, size: 'max', ...(replayPath && { replayPath }) });
  // A fixed seed per suite unless told otherwise: `npm test` runs the same
  // sequences every time (a failure there is the code's, not the draw's);
  // the soak draws new ones (MODEL_RANDOM_SEED) and prints the seed to replay.
  const seed = envInt('MODEL_SEED') ?? (process.env.MODEL_RANDOM_SEED ? Date.now() % 2 ** 31 : fixedSeed(o.name));
  const summary: SuiteSummary = { suite: o.name, runs: 0, operations: 0, clientOperations: 0, client: {}, faults: {}, excused: {}, checked: {}, seed };
  // Said at once (a long soak's report only comes when the whole run ends):
  // the seed, and the first failure as it happened, before any shrinking.
  console.log(`model suite ${o.name}: seed ${seed}`);
  const started = Date.now();
  let firstFailure = true;
  const sayFirstFailure = (report: string) => {
    if (!firstFailure) return;
    firstFailure = false;
    console.error(`model suite ${o.name} (seed ${seed}) failed after ${summary.runs} runs; shrinking:\n${report}`);
  };
  await fc.assert(
    fc.asyncProperty(commands, async (cmds) => {
      const world = o.world();
      await world.quiesce();
      world.receiver('ok');
      const real: Real = { world, run: world.startRun(), tag: world.runTag() };
      const model = o.newModel();
      let checked: Record<string, number>;
      try {
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        world.receiver('ok');
        await world.quiesce();
        checked = await o.settleAndCheck(model, real);
        // A crash of a service process is a failure of its own, whatever the
        // checks saw (nothing restarts it here, as an orchestrator would).
        const crashed = world.crashed();
        if (crashed.length) throw new Error(`run ${real.tag} (logs: ${world.saveLogs(real.tag)}):\n${crashed.join('\n')}`);
      } catch (err) {
        const crashed = world.crashed();
        const told = crashed.length > 0 && !String(err).includes('process ended');
        const also = told ? `\nservice processes that crashed:\n${crashed.join('\n')}` : '';
        sayFirstFailure(`${String(err instanceof Error ? err.stack : err)}${also}\ncommands: ${String(cmds)}`);
        throw err;
      }
      summary.runs++;
      summary.operations += real.run.operations;
      for (const [k, v] of Object.entries(real.run.client)) {
        summary.client[k] = (summary.client[k] ?? 0) + v;
        summary.clientOperations += v;
      }
      for (const [k, v] of Object.entries(real.run.excused)) summary.excused[k] = (summary.excused[k] ?? 0) + v;
      for (const [k, v] of Object.entries(real.run.faults)) summary.faults[k as FaultKind] = (summary.faults[k as FaultKind] ?? 0) + v;
      for (const [k, v] of Object.entries(checked)) summary.checked[k] = (summary.checked[k] ?? 0) + v;
      if (process.env.MODEL_RANDOM_SEED && summary.runs % 10 === 0) {
        console.log(`model suite ${o.name}: ${summary.runs} runs, ${summary.operations} operations, ${Math.round((Date.now() - started) / 1000)} s`);
      }
    }),
    {
      numRuns: envInt('MODEL_RUNS') ?? o.runs,
      seed: summary.seed,
      ...(process.env.MODEL_PATH && { path: process.env.MODEL_PATH }),
      verbose: 1,
      // Shrinking replays whole runs (seconds each, with faults): past this it
      // stops and reports the smallest failing sequence found so far, with the
      // seed and path that replay it. Runs that had not finished by then fail.
      interruptAfterTimeLimit: envInt('MODEL_TIME_LIMIT_MS') ?? 20 * 60_000,
      markInterruptAsFailure: true,
    },
  );
  console.log(JSON.stringify(summary));
  return summary;
}

/**
 * A read of the test's own database connection, tried again for a while: a
 * `During` fault may have terminated it (the first query after fails).
 */
export async function dbRead<T>(read: () => Promise<T>): Promise<T> {
  const end = Date.now() + 15_000;
  for (;;) {
    try {
      return await read();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((res) => setTimeout(res, 200));
    }
  }
}

/**
 * Waits until `done` has held for `stableMs` without a break (a redriven or
 * retried delivery may be about to start even when every row looks final),
 * polling every 200 ms; false after `timeoutMs`.
 */
export async function settled(done: () => Promise<boolean>, timeoutMs: number, stableMs = 1_500): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  let since: number | null = null;
  for (;;) {
    const now = Date.now();
    if (await done()) {
      since ??= now;
      if (now - since >= stableMs) return true;
    } else since = null;
    if (now > end) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Collects what disagrees, then throws them together (a check reports every problem of the run, not the first). */
export function problems(): { add(p: string): void; throwIfAny(context: () => string): void } {
  const list: string[] = [];
  return {
    add: (p) => void list.push(p),
    throwIfAny(context) {
      if (list.length) throw new Error(`${context()}: ${list.length} problem(s)\n  ${list.slice(0, 20).join('\n  ')}`);
    },
  };
}

/** The suite's seed in CI: derived from its name, so it never changes by itself. */
function fixedSeed(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % 2 ** 31;
}

// What a domain module hands the composition root: its HTTP routes, its queue
// with a handler per job type, and the periodic jobs its workers keep alive.
import type { RouteTable } from './http/route.js';
import type { AnyJobHandler, PeriodicJob, Queue } from '../queue/index.js';

export type { PeriodicJob };

/** See ServiceModule.redrives. */
export type RedriveRecord = {
  record(jobIds: readonly string[]): Promise<void>;
  undo(jobIds: readonly string[]): Promise<void>;
};

/** Work a module runs in the worker role besides its queue handlers (e.g. a flusher). */
export type Background = { readonly name: string; start(): Promise<void>; stop(): Promise<void> };

export type ServiceModule = {
  readonly name: string;
  /** Its HTTP routes: the router and the OpenAPI document are built from them. */
  readonly routes: RouteTable;
  readonly queue: Queue;
  /** A handler per job type of its queue, but for the periodic ones (they bring their own). */
  readonly handlers: Readonly<Record<string, AnyJobHandler>>;
  /** Work on a schedule; the composition root makes their handlers and keeps them scheduled. */
  readonly periodic: readonly PeriodicJob[];
  readonly background?: readonly Background[];
  /** Handlers running at once in one worker process; WORKER_CONCURRENCY when absent. */
  readonly concurrency?: number;
  /**
   * An operator's redrive of dead jobs of its queue, for a module whose
   * handlers must tell a redrive from a job that came back by itself: the
   * admin API records it (in the module's database) before the queue moves the
   * jobs, and undoes the record for those it did not move.
   */
  readonly redrives?: RedriveRecord;
};

// What a scenario ends with: the domain checkers' counts printed as one JSON
// line, and the assertions on them: nothing lost, nothing twice, no domain rule
// broken, no 5xx but the outage's 503s, and the load reached every path.
import { expect } from 'vitest';
import type { HttpTally } from './drivers/http.js';
import type { RemindersReport } from './invariants/appointments.js';
import type { Checked } from './invariants/counts.js';
import type { OrdersReport } from './invariants/orders.js';
import type { ParcelsReport } from './invariants/parcels.js';
import type { Backlog } from './settle.js';

export type Outcome = {
  settle: { settled: boolean; ms: number; backlog: Backlog };
  /** Service processes that ended on their own (a crash), not by the scenario's hand. */
  exited: string[];
  http: HttpTally;
  orders: Checked<OrdersReport>;
  appointments: Checked<RemindersReport>;
  parcels: Checked<ParcelsReport>;
};

const strip = <T extends { problems: string[] }>({ problems: _p, ...rest }: T) => rest;

/** Prints the scenario's JSON line (with `extra` in front) and the examples of any problem. */
export function printOutcome(name: string, extra: Record<string, unknown>, o: Outcome): void {
  const line = {
    scenario: name,
    ...extra,
    settleMs: o.settle.ms,
    exited: o.exited,
    http: { ...o.http, serverErrors: o.http.serverErrors.length },
    orders: strip(o.orders),
    appointments: strip(o.appointments),
    parcels: strip(o.parcels),
  };
  console.log(JSON.stringify(line));
  const problems = [...o.orders.problems, ...o.appointments.problems, ...o.parcels.problems];
  if (problems.length) console.log(`${name} problems:\n  ${problems.join('\n  ')}`);
}

export function expectInvariants(o: Outcome, settleTimeoutMs: number): void {
  const { orders, appointments: appts, parcels } = o;
  expect(o.settle.settled, `not settled within ${settleTimeoutMs} ms: ${JSON.stringify(o.settle.backlog)}`).toBe(true);
  expect(o.settle.backlog.jobsDead, 'dead-lettered jobs').toBe(0);
  expect(o.exited, 'service processes that ended on their own').toEqual([]);
  expect(o.http.serverErrors, 'HTTP 5xx other than 503').toEqual([]);
  expect({ lost: orders.lost, duplicated: orders.duplicated, notificationsLost: orders.notifications.lost }).toEqual({
    lost: 0,
    duplicated: 0,
    notificationsLost: 0,
  });
  const { paidWith200ButCancelled, paidWithout200, paidAfterDeadline, wrongCancel } = orders;
  expect({ paidWith200ButCancelled, paidWithout200, paidAfterDeadline, wrongCancel }).toEqual({
    paidWith200ButCancelled: 0,
    paidWithout200: 0,
    paidAfterDeadline: 0,
    wrongCancel: 0,
  });
  expect({ lost: appts.lost, duplicated: appts.duplicated, wrongSlot: appts.wrongSlot }).toEqual({ lost: 0, duplicated: 0, wrongSlot: 0 });
  const { lost, duplicated, aboveSize, wrongArea } = parcels;
  expect({ lost, duplicated, aboveSize, wrongArea, notificationsLost: parcels.notifications.lost }).toEqual({
    lost: 0,
    duplicated: 0,
    aboveSize: 0,
    wrongArea: 0,
    notificationsLost: 0,
  });
  // The load reached every path: both outcomes of the pay race, owed reminders, both kinds of batch.
  expect(orders.paid).toBeGreaterThan(0);
  expect(orders.cancelled).toBeGreaterThan(0);
  expect(appts.expected).toBeGreaterThan(0);
  expect(parcels.full).toBeGreaterThan(0);
  expect(parcels.timeout).toBeGreaterThan(0);
}

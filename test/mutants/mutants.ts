// The seeded mutants of the product's state rules, as data: each breaks one
// rule on purpose by replacing one exact text (found exactly once) in one file,
// and names the suites expected to kill it. `npm run test:mutants` applies
// them one at a time to a scratch copy of the tree (test/mutants/run.ts).
// A new state rule (a transition in src/core/delivery/, a guard of a domain
// statement) adds its mutant here; a text that no longer matches once stops
// the runner, so the list cannot rot silently.

export const MODEL_SUITES = ['orders', 'appointments', 'notifications', 'parcels', 'timers'] as const;
export type ModelSuite = (typeof MODEL_SUITES)[number];

export type Mutant = {
  id: string;
  /** The rule the edit breaks, as the guarantees state it. */
  rule: string;
  file: string;
  find: string;
  replace: string;
  /** Model-based suites expected to kill it with CI's seeds and run counts. */
  model: readonly ModelSuite[];
  /** Integration files (under test/integration/) expected to kill it. */
  integration: readonly string[];
  /** The required set (the score the project keeps), or one added for a further rule. */
  required: boolean;
};

const DELIVERY = 'src/core/delivery';
const TIMERS = 'src/modules/timers';

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'M1',
    rule: 'moving back to a slot whose reminder was withdrawn takes the reminder back',
    file: `${DELIVERY}/take-back.ts`,
    find: `WHERE notifications.status = 'CANCELLED' OR notifications.withdrawn_at IS NOT NULL`,
    replace: 'WHERE false',
    model: ['appointments'],
    integration: ['appointments.withdraw', 'notifications.takeback'],
    required: true,
  },
  {
    id: 'M2',
    rule: 'a reminder delivered while its slot was given up is recorded SENT',
    file: `${DELIVERY}/mark-sent.ts`,
    find: `WHERE id = ANY(\${[...ids]}::uuid[]) AND status <> 'SENT'`,
    replace: `WHERE id = ANY(\${[...ids]}::uuid[]) AND status <> 'SENT' AND withdrawn_at IS NULL`,
    model: ['appointments'],
    integration: ['appointments.withdraw', 'notifications.truth'],
    required: true,
  },
  {
    id: 'M2b',
    rule: 'a withdrawal does not cancel a reminder whose call is running',
    file: `${DELIVERY}/withdraw.ts`,
    find: `SET status = (CASE WHEN n.status = 'SENDING' OR n.refused THEN n.status ELSE 'CANCELLED' END)`,
    replace: `SET status = (CASE WHEN n.refused THEN n.status ELSE 'CANCELLED' END)`,
    model: ['appointments'],
    integration: ['notifications.truth', 'appointments.withdraw'],
    required: true,
  },
  {
    id: 'M3',
    rule: 'the expiry statement cancels only orders past their deadline (by the database clock)',
    file: 'src/modules/orders/sql/cancel.ts',
    find: 'id = ANY(${[...ids]}::uuid[]) AND expires_at <= now()`',
    replace: 'id = ANY(${[...ids]}::uuid[])`',
    model: ['orders'],
    integration: ['orders.batch', 'clock-skew'],
    required: true,
  },
  {
    id: 'M3b',
    rule: 'pay succeeds only inside the payment window',
    file: 'src/modules/orders/sql/pay.ts',
    find: `AND client = \${client} AND status = 'UNPAID' AND expires_at > now()`,
    replace: `AND client = \${client} AND status = 'UNPAID'`,
    model: ['orders'],
    integration: ['orders.api', 'orders.race'],
    required: true,
  },
  {
    id: 'M4',
    rule: 'a FULL batch holds exactly the batch size',
    file: 'src/modules/parcels/sql/commit-batches.ts',
    find: 'ELSE n = ${batchSize}::int END AS ok',
    replace: 'ELSE n <= ${batchSize}::int END AS ok',
    model: ['parcels'],
    integration: ['parcels.regroup'],
    required: true,
  },
  {
    id: 'M4b',
    rule: 'a parcel already in a batch is never taken by another',
    file: 'src/modules/parcels/sql/commit-batches.ts',
    find: 'AND parcels.area_code = input.area_code AND parcels.batch_id IS NULL',
    replace: 'AND parcels.area_code = input.area_code',
    model: ['parcels'],
    integration: ['parcels.regroup', 'parcels.double-commit'],
    required: true,
  },
  {
    id: 'M5',
    rule: 'the SENT mark applies to a row being sent',
    file: `${DELIVERY}/mark-sent.ts`,
    find: `AND status <> 'SENT'`,
    replace: `AND status = 'PENDING'`,
    model: ['notifications'],
    integration: ['notifications.truth', 'notifications.webhook'],
    required: true,
  },
  {
    id: 'M6',
    rule: 'a success is a success once its status line arrives, whatever its body does',
    file: 'src/core/webhook-call.ts',
    find: `      settle();
      resolve({ status: res.statusCode ?? 0, location: res.headers.location });`,
    replace: `      res.on('end', () => {
        settle();
        resolve({ status: res.statusCode ?? 0, location: res.headers.location });
      });
      res.on('close', () => reject(new Error(timeout.message)));`,
    model: ['notifications'],
    integration: ['notifications.faults'],
    required: true,
  },
  {
    id: 'M7',
    rule: 'a row being sent is claimed again only once it is stale',
    file: `${DELIVERY}/claim.ts`,
    find: `OR (status::text = 'SENDING' AND sending_at < now() - \${stale}))`,
    replace: `OR (status::text = 'SENDING'))`,
    model: ['notifications'],
    integration: ['notifications.faults'],
    required: true,
  },
  // Further rules of src/core/delivery/README.md's table (not in the required score).
  {
    id: 'D1',
    rule: 'a failed call is recorded only on the row its delivery claimed (SENDING): never on a row another delivery finished',
    file: `${DELIVERY}/record-failure.ts`,
    find: `WHERE id = \${id}::uuid AND status = 'SENDING'`,
    replace: `WHERE id = \${id}::uuid`,
    model: ['notifications'],
    // A delivery frozen past its call's staleness records its failed call after a later one delivered the row.
    integration: ['notifications.guards'],
    required: false,
  },
  {
    id: 'D2',
    rule: 'a withdrawn row is ended CANCELLED only while still withdrawn (a slot held again keeps its reminder)',
    file: `${DELIVERY}/cancel-withdrawn.ts`,
    find: `WHERE id = \${id}::uuid AND withdrawn_at IS NOT NULL AND`,
    replace: `WHERE id = \${id}::uuid AND`,
    model: ['appointments'],
    // The slot held again between the claim that found the row withdrawn and its end (the take-back holds the row's lock).
    integration: ['notifications.guards'],
    required: false,
  },
  {
    id: 'D3',
    rule: 'a FAILED row is claimed again only after an operator redrove it',
    file: `${DELIVERY}/claim.ts`,
    find: `OR (status::text = 'FAILED' AND redrive_requested)`,
    replace: `OR (status::text = 'FAILED')`,
    model: ['notifications'],
    integration: ['notifications.redrive'],
    required: false,
  },
  {
    id: 'D4',
    rule: 'a refused reminder taken back stays FAILED: holding its slot again does not call it again',
    file: `${DELIVERY}/take-back.ts`,
    find: `WHEN notifications.refused THEN 'FAILED' ELSE 'PENDING' END`,
    replace: `ELSE 'PENDING' END`,
    model: ['appointments'],
    // Refused during a call its slot was left in (CANCELLED, refused), then the slot held again.
    integration: ['notifications.guards', 'notifications.redrive'],
    required: false,
  },
  {
    id: 'D5',
    rule: 'retention deletes a subject only once none of its rows is left to deliver',
    file: `${DELIVERY}/purge.ts`,
    find: `AND (n.status IN ('PENDING', 'SENDING') OR n.redrive_requested OR`,
    replace: `AND (n.redrive_requested OR`,
    model: ['orders'],
    integration: ['retention'],
    required: false,
  },
  {
    id: 'D6',
    rule: 'a withdrawn row is never claimed: no call starts for a slot given up',
    file: `${DELIVERY}/claim.ts`,
    find: 'WHERE id = ANY(${ids}::uuid[]) AND withdrawn_at IS NULL',
    replace: 'WHERE id = ANY(${ids}::uuid[])',
    model: ['appointments'],
    // Not equivalent: the withdrawal leaves a SENDING row and a refused FAILED one withdrawn but claimable (a
    // dead worker's stale SENDING row, a redriven FAILED one), and the guard alone keeps their call from starting.
    integration: ['notifications.guards', 'notifications.faults'],
    required: false,
  },
  {
    id: 'D7',
    rule: 'the relay abandons a SENDING row only past its call (a row claimed since it was found is left to that delivery)',
    file: `${DELIVERY}/abandon.ts`,
    find: "(status::text = 'SENDING' AND sending_at < now() - make_interval(secs => ${sendingSeconds}))",
    replace: "status::text = 'SENDING'",
    model: ['notifications'],
    integration: ['notifications.redrive', 'notifications.faults'],
    required: false,
  },
  // Tenancy: every read and write of the API is filtered by the caller's client.
  {
    id: 'T1',
    rule: "another client's pay changes nothing: the pay guard holds the caller's client",
    file: 'src/modules/orders/sql/pay.ts',
    find: `WHERE id = \${id}::uuid AND client = \${client} AND status = 'UNPAID'`,
    replace: `WHERE id = \${id}::uuid AND status = 'UNPAID'`,
    model: ['orders'],
    integration: ['clients.walk'],
    required: false,
  },
  {
    id: 'T2',
    rule: "another client's cancel changes nothing: the customer's cancel holds the caller's client",
    file: 'src/modules/orders/sql/cancel.ts',
    find: 'cancelSql(Prisma.sql`id = ${id}::uuid AND client = ${client}`',
    replace: 'cancelSql(Prisma.sql`id = ${id}::uuid`',
    model: ['orders'],
    integration: ['clients.walk'],
    required: false,
  },
  {
    id: 'T3',
    rule: "another client's order is answered as an unknown one: the read by id holds the caller's client",
    file: 'src/modules/orders/sql/reads.ts',
    find: 'WHERE o.id = ${id}::uuid AND o.client = ${client}',
    replace: 'WHERE o.id = ${id}::uuid',
    model: ['orders'],
    integration: ['clients.walk'],
    required: false,
  },
  {
    id: 'T4',
    rule: "another client's cancel changes nothing: the appointment's cancel holds the caller's client",
    file: 'src/modules/appointments/sql/change-slot.ts',
    find: `SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
       WHERE id = \${id}::uuid AND client = \${client} AND status = 'BOOKED'`,
    replace: `SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
       WHERE id = \${id}::uuid AND status = 'BOOKED'`,
    model: ['appointments'],
    integration: ['appointments.clients', 'clients.walk'],
    required: false,
  },
  {
    id: 'T5',
    rule: "another client's appointment is answered as an unknown one: the read by id holds the caller's client",
    file: 'src/modules/appointments/sql/reads.ts',
    find: 'FROM appointments WHERE id = ${id}::uuid AND client = ${client}`',
    replace: 'FROM appointments WHERE id = ${id}::uuid`',
    model: ['appointments'],
    integration: ['appointments.clients', 'clients.walk'],
    required: false,
  },
  {
    id: 'T6',
    rule: "another client's subject lists no notifications: the list holds the caller's client",
    file: 'src/modules/notifications/notifications.repository.ts',
    find: 'where: { ...filter, client }',
    replace: 'where: { ...filter }',
    model: ['appointments', 'notifications'],
    integration: ['appointments.clients', 'clients.walk'],
    required: false,
  },
  {
    id: 'T7',
    rule: "one client's parcels never fill another's batch: an area's Redis group names its client",
    file: 'src/modules/parcels/parcels.groups.ts',
    find: 'return area.client === DEFAULT_CLIENT ? area.code : `${area.client}/${area.code}`;',
    replace: 'return area.code;',
    model: ['parcels'],
    integration: ['parcels.clients', 'clients.walk'],
    required: false,
  },
  {
    id: 'T8',
    rule: "a batch holds its own client's parcels only: the commit attaches a parcel by (client, tracking number)",
    file: 'src/modules/parcels/sql/commit-batches.ts',
    find: 'AND parcels.client = j.client AND parcels.tracking_no = j.tracking_no AND j.ok',
    replace: 'AND parcels.tracking_no = j.tracking_no AND j.ok',
    model: ['parcels'],
    integration: ['parcels.clients'],
    required: false,
  },
  {
    id: 'T9',
    rule: "a batch's notice goes to its own client's sorter: the notice joins its area by (client, code)",
    file: 'src/modules/parcels/sql/commit-batches.ts',
    find: 'b JOIN areas a ON a.client = b.client AND a.code = b.area_code',
    replace: 'b JOIN areas a ON a.code = b.area_code',
    model: ['parcels'],
    integration: ['parcels.clients', 'clients.walk'],
    required: false,
  },
  // The timers' rules (src/modules/timers/timers.service.ts's header).
  {
    id: 'TM1',
    rule: 'keep never changes a timer that exists: it answers 200 with the timer as it is',
    file: `${TIMERS}/timers.service.ts`,
    find: "if (input.mode === 'keep') return { result: { status: 200, timer: cur } };",
    replace: '',
    model: ['timers'],
    integration: ['timers.api'],
    required: false,
  },
  {
    id: 'TM2',
    rule: "a debounce pushes the fire time, never past the burst's first call + maxWaitMs",
    file: `${TIMERS}/timers.service.ts`,
    find: 'if (maxWaitMs !== null) dueMs = Math.min(dueMs, startedAt.getTime() + maxWaitMs);',
    replace: '',
    model: ['timers'],
    integration: ['timers.api'],
    required: false,
  },
  {
    id: 'TM3',
    rule: 'a cancel that committed first stops the delivery: the firing CANCELLED and withdrawn, never called',
    file: `${DELIVERY}/cancel.ts`,
    find: "SET status = 'CANCELLED', withdrawn_at = now(), last_error = ${reason}",
    replace: 'SET last_error = ${reason}',
    model: ['timers'],
    integration: ['timers.api', 'timers.delivery'],
    required: false,
  },
  {
    id: 'TM4',
    rule: "a firing is DELIVERED only on its target's confirmation (a 2xx)",
    file: `${TIMERS}/timers.jobs.ts`,
    find: 'return senders.webhook.send(t, m, signal);',
    replace: 'return senders.webhook.send(t, m, signal).catch(() => {});',
    model: ['timers'],
    integration: ['timers.delivery'],
    required: false,
  },
  {
    id: 'TM5',
    rule: 'no delivery claims a firing before its own due time (a delivery due earlier is one it was moved away from)',
    file: `${DELIVERY}/claim.ts`,
    find: 'AND (due_at IS NULL OR due_at <= (SELECT t.due_at FROM t WHERE t.id = notifications.id))',
    replace: '',
    model: ['timers'],
    integration: ['timers.delivery'],
    required: false,
  },
  {
    id: 'TM6',
    rule: 'a move changes only a firing still PENDING: one a delivery claimed keeps its call, and the change is refused (409)',
    file: `${DELIVERY}/move.ts`,
    find: "WHERE id = ${id}::uuid AND status = 'PENDING' AND withdrawn_at IS NULL",
    replace: 'WHERE id = ${id}::uuid',
    model: ['timers'],
    integration: ['timers.races'],
    required: false,
  },
  {
    id: 'TM7',
    rule: "a new firing withdraws the timer's older ones: none is retried or redriven after it",
    file: `${TIMERS}/sql/writes.ts`,
    find: 'await db.$executeRaw`${withdrawSql({',
    replace: 'void Prisma.sql`${withdrawSql({',
    model: ['timers'],
    integration: ['timers.firings'],
    required: false,
  },
];

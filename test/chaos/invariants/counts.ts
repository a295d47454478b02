// What every domain checker reports: how many business outcomes were expected,
// how many were seen as they should be, how many were lost and how many
// happened more than once, plus the notifications announcing them as the
// third party (the webhook receiver) got them. Problems carry examples.
export type Counts = { expected: number; seen: number; lost: number; duplicated: number };

export type NotificationCounts = Counts & {
  /** Deliveries of a notification beyond its first (same id, so same Idempotency-Key): at-least-once, for the receiver to drop. */
  resent: number;
};

export type Checked<T> = T & { problems: string[] };

/** Collects problems, keeping the first `keep` as examples and counting by kind. */
export function problemLog(keep = 10) {
  const examples: string[] = [];
  return {
    add(message: string): void {
      if (examples.length < keep) examples.push(message);
    },
    examples,
  };
}

/** Notification ids the webhook receiver got, with how many times each. */
export function receivedIds(calls: readonly { body: { id: string } }[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const c of calls) m.set(c.body.id, (m.get(c.body.id) ?? 0) + 1);
  return m;
}

type NotificationRow = { id: string; status: string };

/**
 * The notifications of business events, grouped per event: each event must
 * have exactly one row (more is a duplicate), SENT and received by the third
 * party. A row marked SENT that never arrived counts as lost: it was marked
 * done when it was not.
 */
export function checkDeliveries(
  events: ReadonlyMap<string, readonly NotificationRow[]>,
  received: ReadonlyMap<string, number>,
  problems: ReturnType<typeof problemLog>,
): NotificationCounts {
  const c: NotificationCounts = { expected: events.size, seen: 0, lost: 0, duplicated: 0, resent: 0 };
  for (const [event, rows] of events) {
    if (rows.length === 0) {
      c.lost++;
      problems.add(`${event}: no notification`);
      continue;
    }
    if (rows.length > 1) {
      c.duplicated += rows.length - 1;
      problems.add(`${event}: ${rows.length} notifications`);
    }
    const n = rows[0] as NotificationRow;
    const got = received.get(n.id) ?? 0;
    if (n.status !== 'SENT' || got === 0) {
      c.lost++;
      problems.add(`${event}: notification ${n.id} ${n.status}, received ${got} times`);
      continue;
    }
    c.seen++;
    c.resent += got - 1;
  }
  return c;
}

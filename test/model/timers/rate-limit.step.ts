// The timers model suite's operator step: a rate limit set or removed at run
// time (PUT/DELETE /admin/rate-limits) on the timers' queue, their webhook
// job type or the receiver's endpoint, so firings over it wait their turn
// (handed back without an attempt used) while the rules of the record and
// the receiver still hold. The run's limits are removed once it has settled.
import { MODEL_ADMIN_TOKEN } from '../world.js';
import { type Real, Step, fail } from '../runner.js';
import type { Model } from './model.js';

export const LIMIT_SCOPES = ['queue', 'type', 'endpoint'] as const;
export type LimitScope = (typeof LIMIT_SCOPES)[number];

const auth = { authorization: `Bearer ${MODEL_ADMIN_TOKEN}` };

/** The rule's scope in the world: the timers' queue, their webhook job type, or the receiver's host. */
function scopeOf(kind: LimitScope, r: Real): string {
  if (kind === 'queue') return 'timers';
  if (kind === 'type') return 'timers:timer.webhook';
  return `endpoint:webhook:${new URL(r.world.webhook.url).host}`;
}

const path = (scope: string) => `/admin/rate-limits/${encodeURIComponent(scope)}`;

/** Sets `count` a second on a scope, or (count null) removes its rule: 200 with the rule, 204, or 404 when the run set none. */
export class RateLimit extends Step<Model> {
  constructor(
    readonly kind: LimitScope,
    readonly count: number | null,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const scope = scopeOf(this.kind, r);
    if (this.count === null) {
      const res = await r.world.http.send('DELETE', path(scope), undefined, auth);
      const had = m.rateLimits.includes(scope);
      // 404 for one the run set only when a first attempt removed it and its answer was lost (the driver retries).
      if (!(res.status === 404 || (had && res.status === 204))) fail(`DELETE ${scope} (the run set it: ${had})`, res);
      m.rateLimits = m.rateLimits.filter((s) => s !== scope);
      return;
    }
    const res = await r.world.http.send('PUT', path(scope), { count: this.count, intervalMs: 1_000 }, auth);
    if (res.status !== 200 || res.body.count !== this.count) fail(`PUT ${scope} ${this.count}/1s`, res);
    if (!m.rateLimits.includes(scope)) m.rateLimits.push(scope);
  }
  toString() {
    return `RateLimit(${this.kind}, ${this.count ?? 'remove'})`;
  }
}

/** Removes every limit the run set (after its check): the next run starts without. */
export async function clearRateLimits(m: Model, r: Real): Promise<void> {
  for (const scope of m.rateLimits) {
    const res = await r.world.http.send('DELETE', path(scope), undefined, auth);
    if (res.status !== 204 && res.status !== 404) fail(`DELETE ${scope} after the run`, res);
  }
  m.rateLimits = [];
}

// The service's configuration: every environment variable, parsed and checked
// once at start. The only reader of process.env. A wrong value stops the
// service with a message naming the variable.
import { isSupportedCountry } from 'libphonenumber-js';
import { z } from 'zod';
import { maskUrlPassword, urlPassword } from './core/url-password.js';
import { parseWebhookSecrets } from './core/webhook-secrets.js';
import { checkSchedule, parseRules } from './queue/index.js';

const SECOND = 1_000;
const KiB = 1_024;

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const hostPorts = z
  .string()
  .regex(/^[A-Za-z0-9.-]+:\d{1,5}(,[A-Za-z0-9.-]+:\d{1,5})*$/, 'must be comma-separated host:port pairs')
  .transform((v) => v.split(',').map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })))
  .refine((nodes) => nodes.every((n) => n.port >= 1 && n.port <= 65_535), 'ports must be 1..65535');

const bearerToken = z.string().min(32, 'must be at least 32 characters (e.g. openssl rand -hex 24)');

const webhookUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

const webhookSecrets = z.string().transform((v, ctx) => {
  try {
    return parseWebhookSecrets(v);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
});

const retryDelays = (example: string) =>
  z
    .string()
    .regex(/^\d+(,\d+)*$/, `must be comma-separated milliseconds, e.g. ${example}`)
    .transform((v) => v.split(',').map(Number));

/** A comma-separated list (empty: none), each item checked by `item`. */
const list = (item: RegExp, what: string) =>
  z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .refine((xs) => xs.every((x) => item.test(x)), `must be a comma-separated list of ${what}`)
    .default([]);

const schema = z.object({
  // HTTP port of the API.
  PORT: int(0, 65_535).default(3_000),
  // Interface the API listens on.
  HOST: z.string().min(1).default('0.0.0.0'),
  // Redis for the delay queue; a database index in the path is honoured (redis://host:6379/2).
  REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' }).default('redis://127.0.0.1:6379'),
  // Redis Cluster seed nodes, comma-separated host:port. Set: the service runs on
  // the cluster (every script touches one slot); REDIS_URL then only lends its
  // user, password and TLS to every node (a cluster has no database index).
  REDIS_CLUSTER_NODES: hostPorts.optional(),
  // Redis Sentinel: comma-separated host:port of the sentinels watching the
  // master named REDIS_SENTINEL_NAME. Set: the service asks them for the master
  // and follows a failover; REDIS_URL then only lends its user, password,
  // database index and TLS.
  REDIS_SENTINELS: hostPorts.optional(),
  REDIS_SENTINEL_NAME: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1..64 of [A-Za-z0-9._-]')
    .default('mymaster'),
  // A Redis command unanswered this long ends its connection (a hung server or
  // a silently dead network path); what waited on it fails and a new
  // connection is opened. Lua scripts here run in milliseconds.
  REDIS_SOCKET_TIMEOUT_MS: int(500, 60 * SECOND).default(3 * SECOND),
  // PostgreSQL, the source of truth. Unset: an embedded database under DATA_DIR.
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// URL' }).optional(),
  // Where the embedded database keeps its files.
  DATA_DIR: z.string().min(1).default('.data'),
  // Bearer token of the admin API (/admin). Unset: the admin API is disabled.
  // 32 characters at least: about 128 bits when random (openssl rand -hex 24).
  ADMIN_TOKEN: bearerToken.optional(),
  // Serve GET /metrics on its own listener at this port (and METRICS_HOST), not
  // on the API's: a firewall or the network can then keep it internal.
  METRICS_PORT: int(1, 65_535).optional(),
  // Interface of that listener. Unset: HOST.
  METRICS_HOST: z.string().min(1).optional(),
  // Bearer token GET /metrics then needs (compared in constant time). Unset: /metrics is open.
  METRICS_TOKEN: bearerToken.optional(),
  // Requests a second per address (bursts of as many) on the routes without a
  // credential (health, readiness, metrics, the documents and pages), counted
  // by each instance. Over it: 429 RATE_LIMITED.
  PUBLIC_RATE_LIMIT_PER_SECOND: int(1, 1_000_000).default(20),
  // Browser origins (scheme://host[:port], comma-separated) allowed to call the
  // API from a page (CORS). Unset: no CORS headers, no browser page of another origin can read it.
  CORS_ORIGINS: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean),
    )
    .refine((list) => list.every((o) => /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$/.test(o)), 'must be comma-separated origins like https://shop.example.com')
    .optional(),
  // Requests a second per API key, and per client (all its keys together),
  // shared by every instance (through Redis); a burst of one second's worth is
  // admitted at once. Over either: 429 RATE_LIMITED. The defaults are above
  // what three instances serve (about 3 400 requests a second each on a 2-core
  // machine, BENCHMARKS.md): they stop a runaway client, never a busy one.
  API_RATE_LIMIT_PER_SECOND: int(1, 1_000_000).default(10_000),
  CLIENT_RATE_LIMIT_PER_SECOND: int(1, 1_000_000).default(10_000),
  // Failed authentications a minute from one address (bursts of as many); past
  // it the address gets 429 TOO_MANY_AUTH_FAILURES and no key lookup.
  AUTH_FAILURES_PER_MINUTE: int(1, 100_000).default(30),
  // Reminders one contact (phone or address) may be booked or moved into an
  // hour by one client: a leaked key cannot make us a spam relay (each client
  // has its own count, so none can use up or read another's).
  // Over it: 429 CONTACT_RATE_LIMITED.
  REMINDERS_PER_CONTACT_PER_HOUR: int(1, 100_000).default(10),
  // Distinct contacts one client may book or move reminders to within an hour
  // (a sliding hour, shared by every instance): it bounds what one client, or
  // a leaked key of it, can spend on the paid SMS channel, where the limit per
  // contact does not (a list of numbers, each reminded once). Over it: 429
  // CLIENT_CONTACTS_LIMITED. 0: no such limit.
  CLIENT_CONTACTS_PER_HOUR: int(0, 10_000_000).default(100_000),
  // Mean event-loop delay (ms, over the last half second) above which new
  // requests are answered 503 OVERLOADED with Retry-After before any work
  // (/healthz and /metrics never); 0: never shed.
  API_SHED_EVENT_LOOP_DELAY_MS: int(0, 60 * SECOND).default(200),
  // Region (two letters, e.g. GB) of SMS contacts given in national form
  // (07911 123456). Unset: an SMS contact must be international (+44 ...), as
  // a national number alone does not say which country it is in.
  PHONE_DEFAULT_REGION: z
    .string()
    .transform((v, ctx) => {
      if (isSupportedCountry(v)) return v;
      ctx.addIssue({ code: 'custom', message: 'must be a two-letter region code in upper case, e.g. GB' });
      return z.NEVER;
    })
    .optional(),
  // Connections per process to PostgreSQL (the embedded database always uses 1).
  DATABASE_POOL_SIZE: int(1, 200).default(10),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Prefix of every queue key in Redis.
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1..32 of [A-Za-z0-9_-]')
    .default('dq'),
  // Shards per queue (job id hash mod shards), each its own Redis Cluster slot.
  QUEUE_SHARDS: int(1, 1_024).default(1),
  // 1: new job records go to small record groups (listpacks, about 50 B less a
  // job); 0: to one HASH per shard, the only place earlier builds (without this
  // setting) look. 0 by default in this release, so a rolling upgrade is safe;
  // set 1 once no process of an earlier build runs (docs/operations.md, Upgrading).
  QUEUE_RECORD_GROUPS: z.enum(['0', '1']).default('0'),
  // Dead jobs (failed for good) are kept this many days for redrive, and at most
  // this many per queue shard (the oldest go first): an unbounded dead set would
  // in the end fill Redis, which must run with noeviction, and stop every queue.
  QUEUE_DEAD_RETENTION_DAYS: int(1, 3_650).default(7),
  QUEUE_DEAD_MAX_PER_SHARD: int(100, 100_000_000).default(100_000),
  // The starvation bound of job priorities: a job due longer ago than this is
  // claimed ahead of priority, oldest first (lua/lib/due-index.lua).
  QUEUE_PRIORITY_AGING_MS: int(0, 3_600 * SECOND).default(10 * SECOND),
  // Largest job payload accepted, after JSON encoding.
  QUEUE_MAX_PAYLOAD_BYTES: int(64, 16 * KiB * KiB).default(64 * KiB),
  // Outbound rate limits shared by every worker: "<scope>=<count>/<interval>,..."
  // where the scope is a queue, "<queue>:<job type>" or "endpoint:<key>"
  // (docs/operations.md, Rate limits). Run-time ones from the admin API win per scope.
  QUEUE_RATE_LIMITS: z
    .string()
    .default('')
    .transform((v, ctx) => {
      try {
        return parseRules(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
        return z.NEVER;
      }
    }),
  // Handlers running at once per queue in one worker process.
  WORKER_CONCURRENCY: int(1, 10_000).default(50),
  // The same for the queues whose jobs each make one outbound call (notifications,
  // timers): such a job mostly waits on its receiver, so more of them run at once.
  DELIVERY_CONCURRENCY: int(1, 10_000).default(200),
  // A claimed job not acked within its lease is delivered again.
  WORKER_LEASE_MS: int(1_000, 24 * 3_600 * SECOND).default(30 * SECOND),
  // Longest a worker sleeps without checking Redis (safety net for a missed wake-up).
  WORKER_IDLE_RECHECK_MS: int(100, 60 * SECOND).default(5 * SECOND),
  // How long shutdown waits for running handlers.
  SHUTDOWN_GRACE_MS: int(0, 10 * 60 * SECOND).default(10 * SECOND),
  // Payment window of an order when the request does not give one.
  ORDER_PAYMENT_TIMEOUT_SECONDS: int(1, 604_800).default(1_800),
  // How often the orders reconciliation pass runs.
  ORDER_RECONCILE_INTERVAL_SECONDS: int(1, 86_400).default(60),
  // How long past its deadline an unpaid order may stay before the pass cancels it
  // (the expiry job normally does it within milliseconds).
  ORDER_RECONCILE_GRACE_SECONDS: int(0, 86_400).default(30),
  // Longest payment window a deadline move may give, counted from the order's creation
  // (the longest window a create may ask for: a week).
  ORDER_MAX_WINDOW_SECONDS: int(1, 31_536_000).default(604_800),
  // How long before its deadline an unpaid order's payment reminder is written; unset: none
  // (an order may ask for its own, or none, on create).
  PAYMENT_REMINDER_BEFORE_SECONDS: int(1, 86_400).optional(),
  // Reminder lead time when a booking gives none.
  REMINDER_LEAD_SECONDS: int(0, 2_592_000).default(86_400),
  // The IANA time zone of an appointment booked without one: quiet hours are its wall-clock times.
  // Stored as Intl names it (europe/berlin -> Europe/Berlin), as a client's zone is.
  APPOINTMENT_DEFAULT_TIME_ZONE: z
    .string()
    .max(64)
    .refine((v) => {
      try {
        return /^[A-Za-z]/.test(v) && Boolean(new Intl.DateTimeFormat('en-US', { timeZone: v }));
      } catch {
        return false;
      }
    }, 'must be an IANA time zone, e.g. Europe/Berlin')
    .transform((v) => new Intl.DateTimeFormat('en-US', { timeZone: v }).resolvedOptions().timeZone)
    .default('UTC'),
  // Quiet hours of reminders, HH:MM-HH:MM in each appointment's time zone (22:00-08:00 wraps midnight):
  // a reminder planned inside is sent at the window's start before it, or its end after it
  // (REMINDER_QUIET_HOURS_SHIFT), never at or after the appointment's start. Unset: none.
  REMINDER_QUIET_HOURS: z
    .string()
    .regex(/^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM-HH:MM, e.g. 22:00-08:00')
    .refine((v) => v.slice(0, 5) !== v.slice(6), 'must start and end at different times')
    .optional(),
  REMINDER_QUIET_HOURS_SHIFT: z.enum(['before', 'after']).default('before'),
  // How often the appointments reconciliation pass runs, and how late a reminder may be before it repairs it.
  APPOINTMENT_RECONCILE_INTERVAL_SECONDS: int(1, 86_400).default(60),
  APPOINTMENT_RECONCILE_GRACE_SECONDS: int(0, 86_400).default(30),
  // How long after an appointment's start the pass still writes its overdue reminder. An appointment past
  // that is no candidate, so each pass reads only what is ahead, whatever the history. The default covers
  // two intervals plus the grace past the start: a reminder due just before its start (a short lead, a
  // late booking) whose job Redis lost is still written by a pass.
  APPOINTMENT_RECONCILE_AFTER_START_SECONDS: int(0, 2_592_000).default(300),
  // Where notifications are POSTed (JSON, Idempotency-Key = notification id). Unset: they are logged.
  NOTIFY_WEBHOOK_URL: webhookUrl.optional(),
  // Standard Webhooks signing secrets of NOTIFY_WEBHOOK_URL's calls: whsec_<base64>,
  // several separated by spaces or commas during a rotation (each signs). Unset: calls go unsigned.
  NOTIFY_WEBHOOK_SECRET: webhookSecrets.optional(),
  // One endpoint per kind of notification, each with its own secret: order
  // events to the shop, reminders to the SMS or e-mail gateway, batch notices
  // to the depot. A kind without its own URL goes to NOTIFY_WEBHOOK_URL.
  NOTIFY_ORDERS_WEBHOOK_URL: webhookUrl.optional(),
  NOTIFY_ORDERS_WEBHOOK_SECRET: webhookSecrets.optional(),
  NOTIFY_REMINDERS_WEBHOOK_URL: webhookUrl.optional(),
  NOTIFY_REMINDERS_WEBHOOK_SECRET: webhookSecrets.optional(),
  NOTIFY_BATCHES_WEBHOOK_URL: webhookUrl.optional(),
  NOTIFY_BATCHES_WEBHOOK_SECRET: webhookSecrets.optional(),
  // An outbound call that takes longer fails (and is retried): a notification's or a timer's webhook, a broker's confirm of a timer.
  NOTIFY_TIMEOUT_MS: int(100, 120 * SECOND).default(5 * SECOND),
  // Spacing of delivery retries; the last step repeats.
  NOTIFY_RETRY_DELAYS_MS: retryDelays('5000,10000,30000,60000').default([5_000, 10_000, 30_000, 60_000]),
  // Fraction of random shortening of each retry delay (0 = exact spacing).
  NOTIFY_RETRY_JITTER: z.coerce.number().min(0).max(1).default(0.1),
  // Delivery attempts before a notification is FAILED and dead-lettered.
  NOTIFY_MAX_ATTEMPTS: int(1, 100).default(8),
  // Timers (docs/api/timers.md): the only targets a client's timer may name.
  // Webhook hosts as host or host:port (a host alone allows its default ports,
  // 80 and 443); AMQP exchange names; NATS subject prefixes ("orders." allows
  // "orders.paid"; a prefix without a trailing dot or ">" is a whole subject).
  // Empty (the default): that target kind is refused.
  TIMER_WEBHOOK_HOSTS: list(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, 'host or host:port'),
  TIMER_AMQP_EXCHANGES: list(/^[A-Za-z0-9_.:-]{1,255}$/, 'exchange names'),
  TIMER_NATS_SUBJECTS: list(/^[A-Za-z0-9_.:>*-]{1,255}$/, 'subjects or subject prefixes'),
  // The brokers of the AMQP and NATS targets. Unset: that target kind is refused (422), the service runs without it.
  AMQP_URL: z.url({ protocol: /^amqps?$/, error: 'must be an amqp:// or amqps:// URL' }).optional(),
  NATS_URL: z.url({ protocol: /^(nats|tls)$/, error: 'must be a nats:// or tls:// URL' }).optional(),
  // Spacing of a timer's delivery retries per target kind; the last step repeats.
  TIMER_WEBHOOK_RETRY_DELAYS_MS: retryDelays('1000,5000,30000').default([1_000, 5_000, 10_000, 30_000, 60_000]),
  TIMER_AMQP_RETRY_DELAYS_MS: retryDelays('500,2000,10000').default([500, 2_000, 5_000, 10_000, 30_000]),
  TIMER_NATS_RETRY_DELAYS_MS: retryDelays('500,2000,10000').default([500, 2_000, 5_000, 10_000, 30_000]),
  // Delivery attempts of a timer that names none, before it is FAILED and dead-lettered.
  TIMER_MAX_ATTEMPTS: int(1, 100).default(8),
  // How often timers whose delivery job was lost are scheduled again.
  TIMER_RELAY_INTERVAL_SECONDS: int(1, 86_400).default(30),
  // A delivery area is flushed into a batch for its vehicle at this many waiting parcels...
  PARCEL_BATCH_SIZE: int(1, 1_000).default(10),
  // ...or when its first waiting parcel has waited this long (fractions allowed).
  PARCEL_MAX_WAIT_SECONDS: z.coerce.number().min(0.05).max(86_400).default(240),
  // How often the parcels reconciliation pass runs, and how far past the max wait
  // a parcel must be before the pass batches it (a crash between Redis and PostgreSQL).
  PARCEL_RECONCILE_INTERVAL_SECONDS: int(1, 86_400).default(60),
  PARCEL_RECONCILE_GRACE_SECONDS: int(0, 86_400).default(30),
  // How often pending notifications without a delivery job are picked up again.
  NOTIFY_RELAY_INTERVAL_SECONDS: int(1, 86_400).default(30),
  // Terminal history older than this many days is deleted: paid and cancelled orders with their items,
  // appointments started (or cancelled) that long ago, batches with their parcels, each with its
  // notifications once none is left to deliver. Unset: everything is kept. It must exceed
  // QUEUE_DEAD_RETENTION_DAYS, so a dead job an operator may still redrive finds its row.
  RETENTION_DAYS: int(1, 36_500).optional(),
  // How often the retention pass runs (each run deletes in batches of RETENTION_BATCH_SIZE rows).
  RETENTION_INTERVAL_SECONDS: int(60, 7 * 86_400).default(3_600),
  RETENTION_BATCH_SIZE: int(1, 10_000).default(1_000),
  // When the daily report of the previous local day is made: a cron pattern
  // (5 fields, or 6 with seconds) in DAILY_REPORT_TIMEZONE (an IANA name).
  DAILY_REPORT_CRON: z.string().min(1).max(100).default('0 2 * * *'),
  DAILY_REPORT_TIMEZONE: z
    .string()
    .min(1)
    .max(64)
    .refine(isTimeZone, 'must be an IANA time zone, e.g. Asia/Shanghai')
    // The canonical spelling ("asia/shanghai" -> "Asia/Shanghai"): it names the reports' rows.
    .transform((tz) => new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone)
    .default('UTC'),
});

// A pattern croner cannot use stops the service at start, naming the variable.
const checked = schema.superRefine((c, ctx) => {
  if (c.REDIS_SENTINELS && c.REDIS_CLUSTER_NODES) {
    ctx.addIssue({ code: 'custom', path: ['REDIS_SENTINELS'], message: 'give REDIS_SENTINELS or REDIS_CLUSTER_NODES, not both' });
  }
  // A delivery renews its lease to cover one webhook call: the call must fit
  // well inside a lease, or a slow receiver lets the lease run out mid-call and
  // another worker sends the same notification again.
  if (c.NOTIFY_TIMEOUT_MS * 2 > c.WORKER_LEASE_MS) {
    ctx.addIssue({ code: 'custom', path: ['NOTIFY_TIMEOUT_MS'], message: `must be at most half of WORKER_LEASE_MS (${c.WORKER_LEASE_MS})` });
  }
  if (c.METRICS_PORT !== undefined && c.METRICS_PORT === c.PORT) {
    ctx.addIssue({ code: 'custom', path: ['METRICS_PORT'], message: 'must differ from PORT' });
  }
  if (c.METRICS_HOST !== undefined && c.METRICS_PORT === undefined) {
    ctx.addIssue({ code: 'custom', path: ['METRICS_HOST'], message: 'is set without METRICS_PORT' });
  }
  // A secret without its endpoint is a mistake that would leave calls unsigned.
  for (const [secret, url] of [
    ['NOTIFY_WEBHOOK_SECRET', 'NOTIFY_WEBHOOK_URL'],
    ['NOTIFY_ORDERS_WEBHOOK_SECRET', 'NOTIFY_ORDERS_WEBHOOK_URL'],
    ['NOTIFY_REMINDERS_WEBHOOK_SECRET', 'NOTIFY_REMINDERS_WEBHOOK_URL'],
    ['NOTIFY_BATCHES_WEBHOOK_SECRET', 'NOTIFY_BATCHES_WEBHOOK_URL'],
  ] as const) {
    if (c[secret] && !c[url]) ctx.addIssue({ code: 'custom', path: [secret], message: `is set without ${url}` });
  }
  if (c.RETENTION_DAYS !== undefined && c.RETENTION_DAYS <= c.QUEUE_DEAD_RETENTION_DAYS) {
    ctx.addIssue({ code: 'custom', path: ['RETENTION_DAYS'], message: `must exceed QUEUE_DEAD_RETENTION_DAYS (${c.QUEUE_DEAD_RETENTION_DAYS})` });
  }
  // The appointments pass still writes reminders of slots started that long ago: never of one retention may delete.
  if (c.RETENTION_DAYS !== undefined && c.RETENTION_DAYS * 86_400 <= c.APPOINTMENT_RECONCILE_AFTER_START_SECONDS) {
    ctx.addIssue({
      code: 'custom',
      path: ['RETENTION_DAYS'],
      message: `must exceed APPOINTMENT_RECONCILE_AFTER_START_SECONDS (${c.APPOINTMENT_RECONCILE_AFTER_START_SECONDS} s)`,
    });
  }
  if (!isTimeZone(c.DAILY_REPORT_TIMEZONE)) return; // reported on its own variable
  try {
    checkSchedule({ cron: c.DAILY_REPORT_CRON, timezone: c.DAILY_REPORT_TIMEZONE });
  } catch (err) {
    ctx.addIssue({ code: 'custom', path: ['DAILY_REPORT_CRON'], message: err instanceof Error ? err.message : String(err) });
  }
});

/** A bad value as the error shows it: never a secret, nor a password inside a URL (the message goes to logs). */
function shown(name: string, value: string | undefined): string {
  if (value === undefined) return 'nothing';
  if (SECRET_NAME.test(name)) return 'a value, hidden';
  return JSON.stringify(maskUrlPassword(value));
}

/** Variables holding a secret: never shown, a placeholder refused. */
const SECRET_NAME = /(SECRET|TOKEN|PASSWORD|_KEY)$/;

/**
 * The variables still holding a placeholder (`change-me...`, as .env.example
 * ships them), as a secret or as a URL's password: a deployment started
 * before its secrets were set would run with ones anybody can read.
 */
function placeholders(env: Readonly<Record<string, string | undefined>>): string[] {
  return Object.entries(env).flatMap(([name, value]) => {
    if (value === undefined || !(name in schema.shape)) return [];
    const secret = SECRET_NAME.test(name) ? value : urlPassword(value);
    if (secret === null || !/^change-me/i.test(secret)) return [];
    return [`  ${name}: ${SECRET_NAME.test(name) ? 'is' : 'has a password that is'} a placeholder (change-me...): set a real secret (openssl rand -hex 24)`];
  });
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export type Config = z.infer<typeof schema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Parses the environment; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable counts as unset, as in most deployment tools.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const r = checked.safeParse(cleaned);
  const refused = placeholders(cleaned);
  if (r.success && refused.length === 0) return r.data;
  const issues = r.success ? [] : r.error.issues;
  const lines = [...issues.map((i) => `  ${i.path.join('.')}: ${i.message} (got ${shown(String(i.path[0]), env[String(i.path[0])])})`), ...refused];
  throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
}

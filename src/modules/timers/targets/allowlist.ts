// The operator's allowlist of timer targets: a client can make the service
// call only what the configuration names (no SSRF through a timer), and only
// the target kinds whose broker is configured. A refusal names the field.
import type { Config } from '../../../config.js';
import { AppError } from '../../../core/errors.js';
import type { TimerTarget } from './contract.js';

export type TargetAllowlist = Pick<Config, 'TIMER_WEBHOOK_HOSTS' | 'TIMER_AMQP_EXCHANGES' | 'TIMER_NATS_SUBJECTS' | 'AMQP_URL' | 'NATS_URL'>;

const DEFAULT_PORT: Record<string, string> = { 'http:': '80', 'https:': '443' };

/** Throws 422 TARGET_NOT_ALLOWED (or TARGET_KIND_UNAVAILABLE) unless `target` is allowed; `at` prefixes the field's path. */
export function checkTarget(allow: TargetAllowlist, target: TimerTarget, at = ''): void {
  const refuse = (field: string, detail: string, code = 'TARGET_NOT_ALLOWED') => {
    throw new AppError(code, 422, detail, [{ path: `${at}target.${field}`, message: detail }]);
  };
  switch (target.type) {
    case 'webhook': {
      const url = new URL(target.url);
      const port = url.port || DEFAULT_PORT[url.protocol];
      const host = url.hostname.toLowerCase();
      const ok = allow.TIMER_WEBHOOK_HOSTS.some((h) => {
        const i = h.lastIndexOf(':');
        return i < 0 ? h.toLowerCase() === host && url.port === '' : h.slice(0, i).toLowerCase() === host && h.slice(i + 1) === port;
      });
      if (!ok) refuse('url', `the webhook host ${url.host} is not in TIMER_WEBHOOK_HOSTS`);
      if (url.username || url.password) refuse('url', 'a webhook URL carries no user or password');
      return;
    }
    case 'amqp':
      if (!allow.AMQP_URL) refuse('type', 'AMQP targets are off: the service has no AMQP_URL', 'TARGET_KIND_UNAVAILABLE');
      if (!allow.TIMER_AMQP_EXCHANGES.includes(target.exchange)) refuse('exchange', `the exchange ${target.exchange} is not in TIMER_AMQP_EXCHANGES`);
      return;
    case 'nats':
      if (!allow.NATS_URL) refuse('type', 'NATS targets are off: the service has no NATS_URL', 'TARGET_KIND_UNAVAILABLE');
      if (!allow.TIMER_NATS_SUBJECTS.some((p) => subjectAllowed(p, target.subject))) {
        refuse('subject', `the subject ${target.subject} is not in TIMER_NATS_SUBJECTS`);
      }
      return;
  }
}

/** "orders." and "orders.>" allow every subject under orders; anything else is one whole subject. */
function subjectAllowed(pattern: string, subject: string): boolean {
  if (pattern.endsWith('.>')) return subject.startsWith(pattern.slice(0, -1)) && subject.length > pattern.length - 1;
  if (pattern.endsWith('.')) return subject.startsWith(pattern) && subject.length > pattern.length;
  return subject === pattern;
}

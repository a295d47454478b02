// One webhook call, as every outbound POST of the service makes it (a
// notification's, a timer's): a keep-alive pool per endpoint, one timeout
// for the whole call (redirects included), 307/308 followed only within the
// endpoint's origin, the status read as delivered, refused or failed.
import http from 'node:http';
import https from 'node:https';
import { NonRetryableError, ReceiverBusyError } from '../queue/index.js';

/**
 * Connections kept for the next call, closed after 4 s idle: before a
 * receiver's own keep-alive timeout (5 s in Node's server), so a call seldom
 * goes out on a connection the receiver is closing.
 */
const KEEP_ALIVE: http.AgentOptions = { keepAlive: true, timeout: 4_000 };

const USER_AGENT = 'order-timeout-service';
const MAX_REDIRECTS = 3;

/** Least time left worth a call's next hop (ms). */
const MIN_CALL_MS = 50;

/** Prefix of the error of a redirect not followed (the notifications' error categories read it). */
export const REDIRECT_REFUSED = 'webhook redirect not followed';

/**
 * POSTs a JSON body to one URL: resolves on a 2xx, throws NonRetryableError
 * when the receiver refused it (a 4xx other than 408 and 429, or a redirect
 * not followed), and anything else for a retry. `what` names the thing sent
 * in a refusal's message ("the notification"). Pools: one per caller made here.
 */
export type WebhookCall = (body: string, headers: Readonly<Record<string, string>>, signal: AbortSignal) => Promise<void>;

/** A caller of `endpointUrl` with its own connection pool. */
export function createWebhookCaller(endpointUrl: string, timeoutMs: number, what = 'the notification'): WebhookCall {
  const pool = createWebhookPool(timeoutMs, what);
  const url = new URL(endpointUrl);
  return (body, headers, signal) => pool(url, body, headers, signal);
}

/** A caller of any URL sharing one connection pool (per host, as node:http keeps them). */
export function createWebhookPool(timeoutMs: number, what: string) {
  // node:http with a keep-alive pool of its own rather than fetch: fetch's
  // web streams and signals were a sixth of the service's CPU in the
  // reminder drain (bench:e2e), one call costing what the rest of a delivery does.
  const agents = { http: new http.Agent(KEEP_ALIVE), https: new https.Agent(KEEP_ALIVE) };
  const call = async (url: URL, body: string, extra: Readonly<Record<string, string>>, signal: AbortSignal): Promise<void> => {
    const headers = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': USER_AGENT,
      ...extra,
    };
    // The timeout is the whole call's, redirects included.
    const deadline = performance.now() + timeoutMs;
    let target = url;
    for (let hop = 0; ; hop++) {
      const left = Math.ceil(deadline - performance.now());
      // Too little left for an answer: not sent (a call cut off at once has an unknown outcome).
      if (left < MIN_CALL_MS) throw new Error(`webhook did not answer within ${timeoutMs} ms`);
      const secure = target.protocol === 'https:';
      const answer = await post(
        secure ? https.request : http.request,
        target,
        { method: 'POST', headers, agent: secure ? agents.https : agents.http },
        body,
        { ms: left, message: `webhook did not answer within ${timeoutMs} ms`, bodyMs: timeoutMs },
        signal,
      );
      const { status, location, retryAfter } = answer;
      if (status >= 200 && status < 300) return;
      // A 307 or 308 within the endpoint's origin is followed with the same
      // body (a trailing slash added, a path moved). Another origin is not:
      // the signed body may carry a contact, and the receiver would choose
      // where it goes (loopback, a metadata address). Refused, not retried:
      // the receiver answers the same every time, so only an operator
      // (the endpoint's URL changed, then a redrive) can settle it.
      if (status >= 300 && status < 400) {
        const next = location ? redirectTarget(url, target, location) : null;
        if ((status === 307 || status === 308) && next && hop < MAX_REDIRECTS) {
          target = next;
          continue;
        }
        throw new NonRetryableError(
          `${REDIRECT_REFUSED}: HTTP ${status}${location ? ` (to ${location.slice(0, 200)})` : ''}: only ${MAX_REDIRECTS} redirects by 307 or 308 within the endpoint's origin (${url.origin}) are followed; set the endpoint's URL`,
        );
      }
      // The receiver says the request itself is wrong: sending it again cannot help.
      if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
        throw new NonRetryableError(`webhook refused ${what}: HTTP ${status}`);
      }
      // "Too many" or "unavailable, come back then": the worker's limiter slows
      // this endpoint down for every worker (queue/limits/); a retry all the same.
      const wait = status === 429 || status === 503 ? retryAfterMs(retryAfter) : null;
      if (wait !== null) throw new ReceiverBusyError(`webhook failed: HTTP ${status}`, wait);
      throw new Error(`webhook failed: HTTP ${status}`);
    }
  };
  return call;
}

/** A Retry-After header (seconds, or an HTTP date) in ms from now; null when absent or unreadable. */
export function retryAfterMs(header: string | undefined): number | null {
  if (header === undefined) return null;
  const text = header.trim();
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1_000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** Where a redirect's Location points from `from`, if within `endpoint`'s origin (scheme, host and port) and without credentials. */
function redirectTarget(endpoint: URL, from: URL, location: string): URL | null {
  try {
    const to = new URL(location, from);
    // Credentials in a Location would be sent as Authorization: the receiver would choose them.
    return to.origin === endpoint.origin && !to.username && !to.password ? to : null;
  } catch {
    return null;
  }
}

/**
 * POSTs `body` and answers the status (and a redirect's Location), once the
 * receiver's headers come within `timeout.ms` (else it fails with
 * `timeout.message`, the request cut off), or fails as `signal` aborts. The
 * status decides; the body is not waited for: a success whose body comes
 * slowly is still a success (waiting for it under the timeout made a
 * delivered notification look failed, and sent it again). The body is read
 * off in the background, cut off after `timeout.bodyMs`, so its connection
 * goes back to the pool or away.
 */
function post(
  request: typeof http.request,
  url: URL,
  options: http.RequestOptions,
  body: string,
  timeout: { ms: number; message: string; bodyMs: number },
  signal: AbortSignal,
): Promise<{ status: number; location: string | undefined; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      return;
    }
    const req = request(url, options);
    const timer = setTimeout(() => req.destroy(new Error(timeout.message)), timeout.ms);
    const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    req.on('error', (err) => {
      settle();
      reject(err);
    });
    req.on('response', (res) => {
      settle();
      resolve({ status: res.statusCode ?? 0, location: res.headers.location, retryAfter: res.headers['retry-after'] });
      const cut = setTimeout(() => res.destroy(), timeout.bodyMs);
      res.on('error', () => {}); // a body cut off or broken: the answer is given already
      res.on('close', () => clearTimeout(cut));
      res.resume();
    });
    req.end(body);
  });
}

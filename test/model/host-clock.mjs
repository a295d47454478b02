// Loaded first in a model world's service process (NODE_OPTIONS --import):
// the host's wall clock off by the ms written in MODEL_CLOCK_FILE, read again
// every 20 ms, as if the host's clock were set wrong or stepped. Date.now(),
// new Date() and performance.timeOrigin (taken at the process's start, as
// Node takes it) follow; monotonic time (performance.now, timers) does not,
// as a wall-clock step leaves it alone. Plain JavaScript: it runs before tsx.
import { readFileSync } from 'node:fs';

const file = process.env.MODEL_CLOCK_FILE;
if (file) {
  const RealDate = Date;
  const realNow = RealDate.now;
  const read = () => {
    try {
      return Number(readFileSync(file, 'utf8')) || 0;
    } catch {
      return 0; // not written yet, or being replaced: no offset
    }
  };
  let offset = read();
  const now = () => realNow() + offset;
  // One prototype with the real Date: instanceof holds both ways, for dates made before and after.
  function HostDate(...args) {
    if (!new.target) return new RealDate(now()).toString();
    return Reflect.construct(RealDate, args.length === 0 ? [now()] : args, new.target);
  }
  HostDate.prototype = RealDate.prototype;
  Object.setPrototypeOf(HostDate, RealDate);
  HostDate.now = now;
  globalThis.Date = HostDate;
  Object.defineProperty(performance, 'timeOrigin', { value: performance.timeOrigin + offset });
  setInterval(() => {
    offset = read();
  }, 20).unref();
}

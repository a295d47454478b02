// Structured JSON logs (pino); the level comes from the config.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'order-timeout-service'): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}

// A path parameter checked by its schema; anything else is a 400 with the
// resource's own code (path parameters never reach a query or a key unchecked).
import type { z } from 'zod';
import { AppError } from '../errors.js';

export function pathParam<T>(schema: z.ZodType<T>, value: unknown, code: string, message: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new AppError(code, 400, message);
  return r.data;
}

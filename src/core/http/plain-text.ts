// Free text a client sends: bounded, and without control characters (a NUL
// would be refused by PostgreSQL as a 500; the others have no place in names,
// contacts or references).
import { z } from 'zod';

export function plainText(min: number, max: number) {
  return z
    .string()
    .min(min)
    .max(max)
    .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters');
}

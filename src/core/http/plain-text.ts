// Free text a client sends (names, contacts, references, job ids): bounded,
// well-formed Unicode, and without characters that change how it reads.
// A NUL would be refused by PostgreSQL as a 500; a lone surrogate would be
// stored as U+FFFD, another value than the one the idempotency hash was taken
// over; bidi overrides, zero-width and other format characters (\p{Cf}),
// C0 and C1 controls (\p{Cc}) and line separators (\p{Zl}, \p{Zp}) make a
// stored value show as something it is not in logs, the dashboard and the
// webhook payloads it reaches.
import { z } from 'zod';

// A pattern, not a refinement, so the OpenAPI document shows it (JSON Schema's
// patterns take \p{...}).
const VISIBLE_ONLY = /^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*$/u;

// String.prototype.isWellFormed (Node 20), typed here: the project's TypeScript lib is ES2023.
const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

export function plainText(min: number, max: number) {
  return z
    .string()
    .min(min)
    .max(max)
    .refine(isWellFormed, 'must be well-formed Unicode (no lone surrogates)')
    .regex(VISIBLE_ONLY, 'must not contain control, format (bidi, zero-width) or line-separator characters');
}

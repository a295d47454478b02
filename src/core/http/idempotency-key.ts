// The Idempotency-Key request header of create endpoints: absent, or 1..255
// printable ASCII characters (anything else is a 400, never silently ignored).
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { z } from 'zod';
import { AppError } from '../errors.js';

export const idempotencyKeySchema = z.string().regex(/^[\x21-\x7e]([\x20-\x7e]{0,253}[\x21-\x7e])?$/);

/** The headers of a create's 201, as the OpenAPI document describes them. */
export const CREATED_HEADERS = {
  Location: 'the URL of what was created',
  'Idempotent-Replayed': '"true" when the answer replays an earlier request with the same Idempotency-Key',
} as const;

export function idempotencyKey(req: Request): string | null {
  const raw = req.get('Idempotency-Key');
  if (raw === undefined) return null;
  if (!idempotencyKeySchema.safeParse(raw).success) {
    throw new AppError('INVALID_IDEMPOTENCY_KEY', 400, 'Idempotency-Key must be 1..255 printable ASCII characters');
  }
  return raw;
}

/**
 * Hash of a parsed request body, to tell a retry under one Idempotency-Key from
 * a different request: keys are sorted, so equal bodies hash equally whatever
 * their key order.
 */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

function canonicalJson(v: unknown): string {
  if (v instanceof Date) return JSON.stringify(v.toISOString());
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

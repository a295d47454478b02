// What an API key may do. A route names the one scope it needs; a key holds
// any set of them. New domains add theirs here.
import { z } from 'zod';

export const SCOPES = [
  'orders:read',
  'orders:write',
  'appointments:read',
  'appointments:write',
  'parcels:read',
  'parcels:write',
  'areas:write',
  'notifications:read',
  'timers:read',
  'timers:write',
] as const;
export type Scope = (typeof SCOPES)[number];

export const scopeSchema = z.enum(SCOPES);

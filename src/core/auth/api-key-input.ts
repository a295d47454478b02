// What making an API key takes (a holder's name and the scopes), checked the
// same way whether it comes over HTTP (admin routes) or from the keys command.
import { z } from 'zod';
import { SCOPES, scopeSchema } from './scopes.js';

export const createApiKeySchema = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[\x20-\x7e]+$/, 'printable ASCII')
    .meta({ description: 'who holds the key, e.g. checkout' }),
  scopes: z
    .array(scopeSchema)
    .min(1)
    .max(SCOPES.length * 2)
    .meta({ description: `what it may do: ${SCOPES.join(', ')}` }),
});

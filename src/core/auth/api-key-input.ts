// What making an API key takes (a holder's name, the scopes and the client it
// acts for), checked the same way whether it comes over HTTP (admin routes) or
// from the keys command.
import { z } from 'zod';
import { SCOPES, scopeSchema } from './scopes.js';

/** The client of a key made without one, and of every row made before clients existed. */
export const DEFAULT_CLIENT = 'default';

/**
 * A client (tenant) id: it names the owner of every object and becomes part
 * of Redis keys (rate limits, the parcel batcher's groups), so it is held to
 * a strict pattern before anything else sees it.
 */
export const clientIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a client id is 1..64 of [A-Za-z0-9_.-]')
  .meta({ description: "the client (tenant) the key acts for: it sees and changes only that client's objects" });

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
  client: clientIdSchema.default(DEFAULT_CLIENT),
});

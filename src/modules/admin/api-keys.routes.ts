// The operators' API keys routes (under the admin table's token guard): make a
// key (its secret shown this once), list them without secrets, revoke one.
// A revocation holds on every instance within the guard's cache time (500 ms).
import { z } from 'zod';
import type { ApiKeyInfo, ApiKeyStore } from '../../core/auth/api-keys.js';
import { clientIdSchema, createApiKeySchema } from '../../core/auth/api-key-input.js';
import { scopeSchema } from '../../core/auth/scopes.js';
import { AppError } from '../../core/errors.js';
import { type PathParam, type Route, route } from '../../core/http/route.js';

const apiKeyJsonSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  client: z.string(),
  scopes: z.array(scopeSchema),
  createdAt: z.iso.datetime(),
  lastUsedAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
});
const createdApiKeyJsonSchema = z.object({
  id: z.uuid(),
  name: z.string(),
  client: z.string(),
  scopes: z.array(scopeSchema),
  key: z.string().meta({ description: 'the key itself (Authorization: Bearer <key>); shown this once, never again' }),
  createdAt: z.iso.datetime(),
});

const id = { schema: z.uuid(), status: 400, code: 'INVALID_API_KEY_ID', message: () => 'an API key id is a UUID' } satisfies PathParam;

const toJson = (k: ApiKeyInfo) => ({
  id: k.id,
  name: k.name,
  client: k.client,
  scopes: [...k.scopes],
  createdAt: k.createdAt.toISOString(),
  lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
  revokedAt: k.revokedAt?.toISOString() ?? null,
});

export function apiKeyRoutes(keys: ApiKeyStore): Route[] {
  return [
    route({
      method: 'post',
      path: '/admin/api-keys',
      auth: 'admin',
      summary: 'Make an API key for a client; the answer holds the key, shown only this once',
      body: createApiKeySchema,
      responses: { 201: { description: 'the key, with its secret', schema: createdApiKeyJsonSchema } },
      errors: [{ status: 503, code: 'DATABASE_UNAVAILABLE' }],
      handle: async ({ body }, res) => {
        const k = await keys.create(body.name, body.scopes, body.client);
        res.status(201).json({ id: k.id, name: k.name, client: k.client, scopes: [...k.scopes], key: k.key, createdAt: k.createdAt.toISOString() });
      },
    }),
    route({
      method: 'get',
      path: '/admin/api-keys',
      auth: 'admin',
      summary: 'Every API key (of one client, with ?client=), newest first, without secrets (revoked ones say when)',
      query: z.strictObject({ client: clientIdSchema.optional() }),
      responses: { 200: { description: 'the keys', schema: z.object({ keys: z.array(apiKeyJsonSchema) }) } },
      errors: [{ status: 503, code: 'DATABASE_UNAVAILABLE' }],
      handle: async ({ query }, res) => {
        res.json({ keys: (await keys.list(query.client)).map(toJson) });
      },
    }),
    route({
      method: 'delete',
      path: '/admin/api-keys/:id',
      auth: 'admin',
      summary: 'Revoke an API key (every instance refuses it within a second); revoking again answers the same',
      params: { id },
      responses: { 200: { description: 'the key, revoked', schema: apiKeyJsonSchema } },
      errors: [
        { status: 404, code: 'API_KEY_NOT_FOUND' },
        { status: 503, code: 'DATABASE_UNAVAILABLE' },
      ],
      handle: async ({ params }, res) => {
        const k = await keys.revoke(params.id);
        if (!k) throw new AppError('API_KEY_NOT_FOUND', 404, `no API key ${params.id}`);
        res.json(toJson(k));
      },
    }),
  ];
}

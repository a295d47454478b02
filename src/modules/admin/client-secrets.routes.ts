// The operators' routes for each client's webhook signing secrets (its timers'
// calls), under the admin table's token guard: make one (shown this once; the
// client's two newest stay live, for a rotation), list them without secrets,
// delete one. A change reaches every instance's signing within the store's
// cache time (5 s).
import { z } from 'zod';
import { clientIdSchema } from '../../core/auth/api-key-input.js';
import { CLIENT_SECRETS_CACHE_MS, type ClientWebhookSecrets } from '../../core/client-webhook-secrets.js';
import { AppError } from '../../core/errors.js';
import { HTTP_ERRORS, type PathParam, type Route, route } from '../../core/http/route.js';

const client = {
  schema: clientIdSchema,
  status: 400,
  code: 'INVALID_CLIENT',
  message: () => 'a client id is 1..64 of [A-Za-z0-9_.-]',
} satisfies PathParam;
const id = { schema: z.uuid(), status: 400, code: 'INVALID_WEBHOOK_SECRET_ID', message: () => 'a webhook secret id is a UUID' } satisfies PathParam;

/** How soon every instance signs with a change (the store's cache time), as the documents say it. */
const REACHED_IN = `${CLIENT_SECRETS_CACHE_MS / 1_000} s`;

const secretJsonSchema = z.object({ id: z.uuid(), createdAt: z.iso.datetime() });
const createdSecretJsonSchema = z.object({
  id: z.uuid(),
  client: z.string(),
  secret: z
    .string()
    .meta({ description: "`whsec_<base64>`: the key the client's receiver checks its timers' webhook signatures with; shown this once, never again" }),
  createdAt: z.iso.datetime(),
});

export function clientSecretRoutes(secrets: ClientWebhookSecrets): Route[] {
  return [
    route({
      method: 'post',
      path: '/admin/clients/:client/webhook-secrets',
      auth: 'admin',
      summary: "Make a webhook signing secret for a client's timers, shown only this once; the client's older secrets beyond the two newest are deleted",
      description: `During a rotation both newest secrets sign every call (one \`v1,\` signature each); every instance uses the new one within ${REACHED_IN}.`,
      params: { client },
      responses: { 201: { description: 'the secret, with its text', schema: createdSecretJsonSchema } },
      errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params }, res) => {
        const s = await secrets.create(params.client);
        res.status(201).json({ id: s.id, client: s.client, secret: s.secret, createdAt: s.createdAt.toISOString() });
      },
    }),
    route({
      method: 'get',
      path: '/admin/clients/:client/webhook-secrets',
      auth: 'admin',
      summary: "A client's live webhook signing secrets (two at most), newest first, without the secrets",
      params: { client },
      responses: { 200: { description: 'the secrets', schema: z.object({ secrets: z.array(secretJsonSchema) }) } },
      errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params }, res) => {
        const list = await secrets.list(params.client);
        res.json({ secrets: list.map((s) => ({ id: s.id, createdAt: s.createdAt.toISOString() })) });
      },
    }),
    route({
      method: 'delete',
      path: '/admin/clients/:client/webhook-secrets/:id',
      auth: 'admin',
      summary: `Delete one of a client's webhook signing secrets (every instance stops signing with it within ${REACHED_IN})`,
      params: { client, id },
      responses: { 204: { description: 'deleted' } },
      errors: [{ status: 404, code: 'WEBHOOK_SECRET_NOT_FOUND' }, HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params }, res) => {
        if (!(await secrets.remove(params.client, params.id))) {
          throw new AppError('WEBHOOK_SECRET_NOT_FOUND', 404, `client ${params.client} has no webhook secret ${params.id}`);
        }
        res.status(204).end();
      },
    }),
  ];
}

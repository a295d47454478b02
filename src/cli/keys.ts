// The `keys` subcommand: API keys for operators without HTTP (or before the
// first one exists). On DATABASE_URL, or on the embedded database while the
// service is not running: one process at a time may open it, so the CLI
// refuses while the service has it (its lock file) rather than make a key the
// running service would never see.
//   keys create --name checkout --scopes orders:write,orders:read [--client shop-a]
//   keys list [--client shop-a]
//   keys revoke <id>
import { z } from 'zod';
import type { Config } from '../config.js';
import { clientIdSchema, createApiKeySchema } from '../core/auth/api-key-input.js';
import { type ApiKeyInfo, apiKeyStore } from '../core/auth/api-keys.js';
import { createDb } from '../core/db.js';
import { DataDirInUseError, type EmbeddedDb, startEmbeddedDb } from '../core/embedded-db.js';
import type { Logger } from '../core/logger.js';
import { migrate } from '../core/migrate.js';

export const KEYS_USAGE = 'usage: keys create --name <name> --scopes <scope,scope,...> [--client <client>] | keys list [--client <client>] | keys revoke <id>';

/** Runs one keys command; what it prints goes to `out`. Returns the exit code. */
export async function keysCommand(config: Config, args: readonly string[], log: Logger, out: (line: string) => void): Promise<number> {
  const [command, ...rest] = args;
  const usage = (why: string) => {
    out(`${why}\n${KEYS_USAGE}`);
    return 2;
  };
  let action: (keys: ReturnType<typeof apiKeyStore>) => Promise<number>;
  if (command === 'create') {
    const parsed = createApiKeySchema.safeParse({
      name: option(rest, '--name'),
      scopes: option(rest, '--scopes')?.split(',').filter(Boolean),
      client: option(rest, '--client'),
    });
    if (!parsed.success) return usage(z.prettifyError(parsed.error));
    const { name, scopes, client } = parsed.data;
    action = async (keys) => {
      const k = await keys.create(name, scopes, client);
      out(JSON.stringify({ id: k.id, name: k.name, client: k.client, scopes: k.scopes, key: k.key, createdAt: k.createdAt.toISOString() }, null, 2));
      out('The key is shown this once: keep it in the client secret store now.');
      return 0;
    };
  } else if (command === 'list') {
    const given = option(rest, '--client');
    const client = clientIdSchema.optional().safeParse(given);
    if (!client.success) return usage(z.prettifyError(client.error));
    action = async (keys) => {
      for (const k of await keys.list(client.data)) out(JSON.stringify(json(k)));
      return 0;
    };
  } else if (command === 'revoke') {
    const id = z.uuid().safeParse(rest[0]);
    if (!id.success) return usage('revoke takes the id of a key (a UUID)');
    action = async (keys) => {
      const k = await keys.revoke(id.data);
      if (!k) {
        out(`no API key ${id.data}`);
        return 1;
      }
      out(JSON.stringify(json(k)));
      return 0;
    };
  } else return usage(command ? `unknown keys command "${command}"` : 'keys needs a command');

  let embedded: EmbeddedDb | null = null;
  try {
    embedded = config.DATABASE_URL ? null : await startEmbeddedDb(config.DATA_DIR);
  } catch (err) {
    if (!(err instanceof DataDirInUseError)) throw err;
    out(
      `refused: process ${err.pid} (a running service) has the embedded database under ${config.DATA_DIR} open; a key made here would not reach it.\n` +
        "Use the running service's admin API (POST /admin/api-keys with the admin token), or stop the service and run this again.\n" +
        `(If no such process runs, delete ${err.lockFile}.)`,
    );
    return 1;
  }
  try {
    const url = config.DATABASE_URL ?? (embedded?.url as string);
    await migrate(url, log);
    const db = createDb(url, 1);
    try {
      return await action(apiKeyStore(db));
    } finally {
      await db.$disconnect();
    }
  } finally {
    await embedded?.stop();
  }
}

function option(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i >= 0) return args[i + 1];
  const inline = args.find((a) => a.startsWith(`${name}=`));
  return inline?.slice(name.length + 1);
}

const json = (k: ApiKeyInfo) => ({
  id: k.id,
  name: k.name,
  client: k.client,
  scopes: k.scopes,
  createdAt: k.createdAt.toISOString(),
  lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
  revokedAt: k.revokedAt?.toISOString() ?? null,
});

// Entry point: parses the subcommand and the environment, starts the service
// for that role, and stops it in reverse order on SIGTERM/SIGINT.
//   all (default): API + workers   api: API only   worker: workers only
//   migrate: apply database migrations and exit
//   stats [--watch]: print the queue table (no database needed)
//   keys create|list|revoke: the clients' API keys (src/cli/keys.ts)
//   ungroup: move job records out of the record groups (src/cli/ungroup.ts)
//   reshard --queue <name|all> --to <n>: change a queue's shard count while the service runs (src/cli/reshard.ts)
import { keysCommand } from './cli/keys.js';
import { reshardCommand } from './cli/reshard.js';
import { statsCommand } from './cli/stats.js';
import { ungroupCommand } from './cli/ungroup.js';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './core/logger.js';
import { maskUrlPassword } from './core/url-password.js';
import { ROLES, type Role, startService } from './service.js';

async function main(): Promise<void> {
  const arg = process.argv[2] ?? 'all';
  if (arg !== 'stats' && arg !== 'keys' && arg !== 'ungroup' && arg !== 'reshard' && !(ROLES as readonly string[]).includes(arg)) {
    process.stderr.write(`usage: main [${ROLES.join('|')}|stats [--watch]|keys ...|ungroup|reshard ...]  (got "${arg}")\n`);
    process.exit(2);
  }
  const role = arg as Role;
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  if (arg === 'stats') return statsCommand(config, process.argv.includes('--watch'));
  if (arg === 'ungroup') process.exit(await ungroupCommand(config, (line) => process.stdout.write(`${line}\n`)));
  if (arg === 'reshard') {
    process.exit(await reshardCommand(config, process.argv.slice(3), createLogger(config.LOG_LEVEL), (line) => process.stdout.write(`${line}\n`)));
  }
  if (arg === 'keys') {
    const code = await keysCommand(config, process.argv.slice(3), createLogger('warn'), (line) => process.stdout.write(`${line}\n`));
    process.exit(code);
  }
  const log = createLogger(config.LOG_LEVEL).child({ role });
  const service = await startService(config, role, log);
  if (role === 'migrate') {
    await service.stop();
    log.info('migrations done');
    return;
  }
  const redis = config.REDIS_CLUSTER_NODES
    ? { redisCluster: config.REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`) }
    : { redis: maskUrlPassword(config.REDIS_URL) };
  log.info(redis, 'service started');

  let stopping = false;
  const onSignal = async (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    await service.stop();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', (s) => void onSignal(s));
  process.on('SIGINT', (s) => void onSignal(s));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

// Generates the Prisma client into src/generated. The Prisma 7 CLI looks for a
// native schema-engine binary even for `generate` (which does not run it) and
// cannot download one on the build machines: any existing file satisfies it.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const env = { ...process.env };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= fileURLToPath(import.meta.url);
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
const r = spawnSync('npx', ['prisma', 'generate'], { stdio: 'inherit', env });
process.exit(r.status ?? 1);

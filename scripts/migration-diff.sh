#!/usr/bin/env bash
# Writes the SQL that takes the database from one Prisma schema to another,
# offline, with Prisma 6.19's WASM schema engine (the Prisma 7 CLI needs a
# native engine binary that cannot be downloaded on the build machines).
#
#   scripts/migration-diff.sh NEW_SCHEMA [OLD_SCHEMA] > prisma/migrations/<ts>_<name>/migration.sql
#
# Without OLD_SCHEMA the diff starts from an empty database. To diff against
# the last committed schema: git show HEAD:prisma/schema.prisma > /tmp/old.prisma
set -euo pipefail
new=$(realpath "$1")
old=${2:+$(realpath "$2")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo '{"name":"migration-diff","private":true,"type":"module"}' > package.json
npm install --no-audit --no-fund --silent prisma@6.19.3 @prisma/adapter-pg@6.19.3 >&2
# 6.19 wants the url in the datasource block (7 rejects it), and no output path of ours.
for s in new old; do
  src=${!s}
  [ -n "$src" ] || continue
  sed -e 's#provider = "postgresql"#provider = "postgresql"\n  url      = env("DATABASE_URL")#' \
      -e '/^  output /d' "$src" > "$s.prisma"
done
cat > prisma.config.ts <<'CONF'
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';
// The adapter must be able to connect (DATABASE_URL, default the local postgres database); nothing is written.
export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: './new.prisma',
  adapter: async () => new PrismaPg({ connectionString: process.env.DATABASE_URL! }),
});
CONF
touch fake-query-engine
from=(--from-empty)
[ -n "$old" ] && from=(--from-schema-datamodel old.prisma)
DATABASE_URL=${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/postgres} \
PRISMA_QUERY_ENGINE_LIBRARY="$work/fake-query-engine" \
  npx prisma migrate diff "${from[@]}" --to-schema-datamodel new.prisma --script

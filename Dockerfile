# Image of the service: built from a clean clone (the Prisma client is
# generated and the TypeScript compiled in the build stage), run as compiled
# JavaScript by the unprivileged `node` user with the production dependencies
# only (no tsx, no Prisma CLI: migrations are applied by the service itself).
# Node.js 24, an LTS line maintained until April 2028; the code also runs on
# Node 20.19+ (package.json's engines). Pinned by version tag: bump it with
# docs/operations.md.
ARG NODE_IMAGE=node:24.18.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# The production dependencies alone. --omit=optional too: npm otherwise keeps
# the Prisma CLI and TypeScript (about 250 MB), optional peers of
# @prisma/client; the one other optional package, pg-cloudflare, serves
# Cloudflare Workers only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund

FROM ${NODE_IMAGE}
WORKDIR /app
ENV NODE_ENV=production PORT=3000
COPY --from=deps /app/package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Read at run time from beside dist/: the queue's Lua scripts and the migrations.
COPY --from=build /app/lua ./lua
COPY --from=build /app/prisma ./prisma
# Only for the embedded database (no DATABASE_URL); a read-only deployment with
# PostgreSQL writes nowhere.
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
CMD ["node", "dist/main.js", "all"]

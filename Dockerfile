# Image of the service: built from a clean clone (the Prisma client is
# generated and the TypeScript compiled inside the build), run as compiled
# JavaScript by an unprivileged user.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production PORT=3000
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Read at run time from beside dist/: the queue's Lua scripts and the migrations.
COPY --from=build /app/lua ./lua
COPY --from=build /app/prisma ./prisma
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
CMD ["node", "dist/main.js", "all"]

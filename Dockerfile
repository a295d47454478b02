# Image of the service for docker-compose users. The service runs TypeScript
# through tsx, so the image carries the sources and the full dependency tree.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
ENV NODE_ENV=production PORT=3000
EXPOSE 3000
CMD ["npx", "tsx", "src/main.ts", "all"]

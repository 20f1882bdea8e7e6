# Two stages: build dist/ with the dev toolchain, then run it with production
# dependencies only. Without DATABASE_URL the container keeps its embedded
# database in /data (mount a volume there).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:24-bookworm-slim
ENV NODE_ENV=production PORT=8084 SVC_DATA_DIR=/data GAME_DIR=/app/examples/demo-game
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY examples ./examples
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8084
VOLUME ["/data"]
# Readiness: migrations done and the database answering (the image has no curl).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8084)+'/api/v1/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM drains in-flight requests and closes sockets with 1001 before exit.
STOPSIGNAL SIGTERM
CMD ["node", "dist/host.mjs"]

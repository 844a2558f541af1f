import { defineConfig } from 'vitest/config';

// A lane's scratch application runs this checkout's tests against the installed package: each
// public entry point a test imports from src/ resolves to drizzle-idempotency's own subpath. What
// is not public (a test helper's identifier quoting, say) stays the copied source.
const up = String.raw`^(?:\.\./)+src/`;

export default defineConfig({
  resolve: {
    alias: [
      { find: new RegExp(`${up}index\\.js$`), replacement: 'drizzle-idempotency' },
      { find: new RegExp(`${up}service\\.js$`), replacement: 'drizzle-idempotency/service' },
      {
        find: new RegExp(
          `${up}(sqlite|pg|libsql|mysql|d1|bun-sqlite|durable-sqlite|http|observe|function)/index\\.js$`,
        ),
        replacement: 'drizzle-idempotency/$1',
      },
      {
        find: new RegExp(`${up}http/(express|hono|fastify|fetch|nestjs)\\.js$`),
        replacement: 'drizzle-idempotency/$1',
      },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 600_000,
  },
});

import { defineConfig } from 'vitest/config';

// Tests that need the real PostgreSQL server live in `*.pg-server.test.ts` and run whenever
// DATABASE_URL is set (CI sets it; an unreachable server then fails them). Without it they are
// left out loudly, never reported as passed.
const serverTests = '**/*.pg-server.test.ts';
if (!process.env.DATABASE_URL) {
  console.warn(`DATABASE_URL is not set: the PostgreSQL server tests (${serverTests}) do not run.`);
}

// RabbitMQ tests (`*.amqp-server.test.ts`) follow the same rule with AMQP_URL.
const amqpTests = '**/*.amqp-server.test.ts';
if (!process.env.AMQP_URL) {
  console.warn(`AMQP_URL is not set: the RabbitMQ tests (${amqpTests}) do not run.`);
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [
      '**/node_modules/**',
      ...(process.env.DATABASE_URL ? [] : [serverTests]),
      ...(process.env.AMQP_URL ? [] : [amqpTests]),
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

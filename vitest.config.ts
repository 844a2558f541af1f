import { defineConfig } from 'vitest/config';

// Tests that need a real server live in `*.pg-server.test.ts` (PostgreSQL, under DATABASE_URL),
// `*.mysql-server.test.ts` (MySQL or MariaDB, under MYSQL_URL) and `*.amqp-server.test.ts`
// (RabbitMQ, under AMQP_URL), and run whenever their URL is set (CI sets them all; an unreachable
// server then fails them). Without it they are left out loudly, never reported as passed.
const servers = [
  { env: 'DATABASE_URL', name: 'PostgreSQL', tests: '**/*.pg-server.test.ts' },
  { env: 'MYSQL_URL', name: 'MySQL', tests: '**/*.mysql-server.test.ts' },
  { env: 'AMQP_URL', name: 'RabbitMQ', tests: '**/*.amqp-server.test.ts' },
];
const missing = servers.filter((server) => !process.env[server.env]);
for (const server of missing) {
  console.warn(
    `${server.env} is not set: the ${server.name} server tests (${server.tests}) do not run.`,
  );
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', ...missing.map((server) => server.tests)],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

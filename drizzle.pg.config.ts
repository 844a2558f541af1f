import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/pg/schema.ts',
  out: './drizzle/pg',
});

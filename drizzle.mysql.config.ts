import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'mysql',
  schema: './src/mysql/schema.ts',
  out: './drizzle/mysql',
});

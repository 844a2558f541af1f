import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/sqlite-dialect/schema.ts',
  out: './drizzle/sqlite',
});

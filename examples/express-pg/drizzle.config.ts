// `npx drizzle-kit generate --config examples/express-pg/drizzle.config.ts`: the application's
// migrations, the re-exported keys table included.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './examples/express-pg/schema.ts',
  out: './examples/express-pg/drizzle',
});

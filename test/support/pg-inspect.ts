import { sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../../src/pg/index.js';

/** What a schema holds: its tables and indexes (sorted) and the number of recorded migrations. */
export interface SchemaContents {
  tables: string[];
  indexes: string[];
  migrations: number | null;
}

async function rows<Row>(db: AnyPgDatabase, query: ReturnType<typeof sql>): Promise<Row[]> {
  return ((await db.execute(query)) as unknown as { rows: Row[] }).rows;
}

/** Reads what `schema` holds, without writing anything. */
export async function inspectSchema(db: AnyPgDatabase, schema: string): Promise<SchemaContents> {
  const relations = await rows<{ name: string; kind: string }>(
    db,
    sql`SELECT c.relname AS name, c.relkind AS kind FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ${schema} AND c.relkind IN ('r', 'i') ORDER BY c.relname`,
  );
  const tables = relations.filter((r) => r.kind === 'r').map((r) => r.name);
  let migrations: number | null = null;
  if (tables.includes('__idempotency_migrations')) {
    const [row] = await rows<{ n: number }>(
      db,
      sql`SELECT count(*)::int AS n FROM ${sql.identifier(schema)}.__idempotency_migrations`,
    );
    migrations = row?.n ?? 0;
  }
  return {
    tables,
    indexes: relations.filter((r) => r.kind === 'i').map((r) => r.name),
    migrations,
  };
}

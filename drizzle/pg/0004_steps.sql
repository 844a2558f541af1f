-- The recorded steps of a key's handler (docs/steps.md), kept in its row so that retention and
-- erasure take them with the key. Adding a nullable column rewrites no row.
ALTER TABLE "keys" ADD COLUMN "steps" text;

-- Unqualified names on purpose: the store applies this file with `search_path` set to the schema
-- it was given, so one migration serves every schema. IF NOT EXISTS adopts a `keys` table made
-- by hand with the same columns (the store checks them first): its rows stay.
CREATE TABLE IF NOT EXISTS "keys" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"fingerprint" text NOT NULL,
	"status" text NOT NULL,
	"response" text,
	"expires" double precision NOT NULL
);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "keys_status_expires_id_idx" ON "keys" USING btree ("status","expires","id");

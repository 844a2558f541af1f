CREATE TABLE "keys" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"fingerprint" text NOT NULL,
	"status" text NOT NULL,
	"response" text,
	"expires" double precision NOT NULL,
	"lease_until" double precision,
	"attempt" bigint DEFAULT 1 NOT NULL,
	"unrecorded" boolean DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE TABLE "orders" (
	"id" text PRIMARY KEY NOT NULL,
	"item" text NOT NULL,
	"quantity" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "keys_status_expires_id_idx" ON "keys" USING btree ("status","expires","id");--> statement-breakpoint
CREATE INDEX "keys_done_id_expires_idx" ON "keys" USING btree ("id","expires") WHERE status = 'done';
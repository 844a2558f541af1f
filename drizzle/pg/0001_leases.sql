ALTER TABLE "keys" ADD COLUMN "lease_until" double precision;--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "attempt" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "keys" ADD COLUMN "unrecorded" boolean DEFAULT false NOT NULL;
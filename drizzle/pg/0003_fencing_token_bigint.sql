-- The fencing token is now drawn from the real clock (milliseconds × 1,024), past integer's range.
-- Changing the type rewrites the table under an ACCESS EXCLUSIVE lock: run it when a pause fits.
ALTER TABLE "keys" ALTER COLUMN "attempt" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "keys" ALTER COLUMN "attempt" SET DEFAULT 1;
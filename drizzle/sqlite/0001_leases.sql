ALTER TABLE `keys` ADD `lease_until` real;--> statement-breakpoint
ALTER TABLE `keys` ADD `attempt` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `keys` ADD `unrecorded` integer DEFAULT false NOT NULL;
-- IF NOT EXISTS adopts a `keys` table that an older service created by hand with the same
-- columns: its rows stay and only the index is added. The store checks the columns first.
CREATE TABLE IF NOT EXISTS `keys` (
	`id` text PRIMARY KEY NOT NULL,
	`fingerprint` text NOT NULL,
	`status` text NOT NULL,
	`response` text,
	`expires` real NOT NULL
);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS `keys_status_expires_id_idx` ON `keys` (`status`,`expires`,`id`);

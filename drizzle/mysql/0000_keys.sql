-- The store applies this file with `keys` (and the names derived from it) replaced by the table
-- name it was given, so one migration serves every table. IF NOT EXISTS adopts a table made by
-- hand with the same columns (the store checks them first): its rows stay.
CREATE TABLE IF NOT EXISTS `keys` (
	`id` varbinary(1024) NOT NULL,
	`fingerprint` varbinary(1024) NOT NULL,
	`status` varchar(7) NOT NULL,
	`response` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
	`expires` double NOT NULL,
	`lease_until` double,
	`attempt` int NOT NULL DEFAULT 1,
	`unrecorded` boolean NOT NULL DEFAULT false,
	CONSTRAINT `keys_id` PRIMARY KEY(`id`)
);
--> statement-breakpoint
CREATE INDEX `keys_status_expires_id_idx` ON `keys` (`status`,`expires`,`id`);
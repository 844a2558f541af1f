-- The fencing token is now drawn from the real clock (milliseconds × 1,024), past INT's range.
ALTER TABLE `keys` MODIFY COLUMN `attempt` bigint NOT NULL DEFAULT 1;
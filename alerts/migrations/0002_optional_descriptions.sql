-- A webhook's description is optional: NULL when none was given, as its
-- owner's answers show it (null, not an empty text).
ALTER TABLE webhooks ALTER COLUMN description DROP NOT NULL,
                     ALTER COLUMN description DROP DEFAULT;
UPDATE webhooks SET description = NULL WHERE description = '';

-- Dead letters an operator can work with: the rule a message broke (a
-- stable name to filter by), what the log said of the message besides its
-- payload (the key and timestamp the rules check, kept so a re-drive
-- decides on the same facts), and what became of it.
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS rule TEXT;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS message_key BYTEA;
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS message_time TIMESTAMPTZ;
-- 'resolved' (set aside by hand) or 'redriven' (applied after all).
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS resolution TEXT;
-- Re-drives tried and refused again.
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS dead_letters_unresolved ON dead_letters (partition, "offset")
    WHERE resolved_at IS NULL;

-- Boards withdrawn by a BoardRetracted event. The rows of a retracted board
-- are deleted; this remembers the retraction, so the board stays withdrawn
-- if its event is ever applied later (a dead letter re-driven after the
-- retraction, or a retraction that reached the log first).
CREATE TABLE IF NOT EXISTS retracted_boards (
    event_id     UUID PRIMARY KEY,
    bank_id      BIGINT      NOT NULL,
    retracted_by UUID        NOT NULL,
    reason       TEXT,
    retracted_at TIMESTAMPTZ NOT NULL
);

-- A retraction names its board by event id.
CREATE INDEX IF NOT EXISTS boards_event_id ON boards (event_id);

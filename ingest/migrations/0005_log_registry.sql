-- The log is the system of record for banks too. Ingest reads the bank
-- events on the topic at start, from where it last read (from the start
-- when this table is empty: a fresh or replaced database), and restores
-- what its own tables lack, so it never hands out an id or code the log
-- already has.
CREATE TABLE log_positions (
    topic       TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    next_offset BIGINT  NOT NULL,
    PRIMARY KEY (topic, partition)
);

-- Set when this table and the log disagree about the bank (the same id
-- with another code): its boards and changes are refused until they agree,
-- as the projector would apply them to the log's bank.
ALTER TABLE banks ADD COLUMN log_conflict TEXT;

-- What the log said of each bank up to those positions: the next start
-- folds what it reads onto it (a change to a bank registered earlier) and
-- checks every bank against it, so a conflict an operator mended clears.
CREATE TABLE log_banks (
    id           BIGINT  PRIMARY KEY,
    code         TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    image_url    TEXT    NOT NULL,
    social_links JSONB   NOT NULL,
    active       BOOLEAN NOT NULL
);

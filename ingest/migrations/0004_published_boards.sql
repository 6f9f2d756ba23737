-- Boards this ingest accepted, recorded before they are published: a
-- retraction must name a board of its own bank (404 otherwise), and
-- retracting one twice publishes one event (the second answer repeats the
-- first). Kept for RATEWIRE_RETRACTION_WINDOW_DAYS, then purged.
CREATE TABLE published_boards (
    event_id     UUID        PRIMARY KEY,
    bank_id      BIGINT      NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    retracted_by UUID
);
CREATE INDEX published_boards_by_age ON published_boards (created_at);

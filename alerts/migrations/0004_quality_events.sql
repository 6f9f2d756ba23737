-- Webhooks may also receive the market watchdog's events, named in
-- `events` by their owners: quality.publication_missed and
-- quality.spread_cap_breached. A webhook's alerts' crossings come to it
-- whatever it names.
ALTER TABLE webhooks ADD COLUMN events TEXT[] NOT NULL DEFAULT '{}';

-- The watchdog's events, each recorded once (its id says what happened:
-- a bank's run of missed slots, a board's pair over the cap) in the same
-- transaction as what found it; the deliverer turns each into one message
-- per webhook naming its type, and deletes it, as it does crossings.
CREATE TABLE quality_events (
    id          TEXT        PRIMARY KEY,
    type        TEXT        NOT NULL,
    -- The message's body as sent (and signed).
    body        TEXT        NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL
);
CREATE TRIGGER quality_events_added
    AFTER INSERT ON quality_events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_added();

-- Where the judge of missed slots stands for each bank: the end of the
-- last slot it judged, and the end of the run of missed slots it last
-- told, so that a run is told once however long it lasts.
CREATE TABLE slot_watch (
    bank_id      BIGINT      PRIMARY KEY,
    judged_until TIMESTAMPTZ NOT NULL,
    missed_until TIMESTAMPTZ
);

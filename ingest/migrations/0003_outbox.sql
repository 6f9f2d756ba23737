-- Bank changes and their events are committed together: the event waits
-- here until the broker acknowledged it, so ingest's record and the log
-- never disagree (a crash or a broker outage only delays the event).
CREATE TABLE outbox (
    id         BIGSERIAL   PRIMARY KEY,
    bank_id    BIGINT      NOT NULL,
    envelope   TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX outbox_by_bank ON outbox (bank_id);

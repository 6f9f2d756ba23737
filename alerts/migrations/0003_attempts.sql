-- Every attempt at a message, for its owner's questions (`GET
-- /api/v1/webhooks/{id}/deliveries`): when it was made, how long it took,
-- what it came to. Kept as long as its message.
CREATE TABLE attempts (
    message_id  TEXT        NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    -- The message's attempts when it was claimed (1 for the first); an
    -- attempt cut short by a crash is never recorded, leaving a gap.
    number      INT         NOT NULL,
    webhook_id  UUID        NOT NULL,
    -- To the millisecond, as shown: a page of them ends between two.
    started_at  TIMESTAMPTZ NOT NULL,
    duration_ms INT         NOT NULL,
    -- The answer's status (NULL: none came).
    status      INT,
    -- Why it failed (NULL: delivered).
    error       TEXT,
    PRIMARY KEY (message_id, number)
);
CREATE INDEX attempts_webhook ON attempts (webhook_id, started_at);

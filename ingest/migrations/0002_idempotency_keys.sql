-- Idempotency-Key of board pushes: a retried push with the same key and body
-- gets the first answer and publishes nothing new. The event id is chosen
-- before publishing, so a retry after an unanswered attempt re-publishes the
-- same event, which the projector applies once.
CREATE TABLE idempotency_keys (
    bank_id      BIGINT      NOT NULL,
    key          TEXT        NOT NULL,
    body_hash    TEXT        NOT NULL,
    event_id     UUID        NOT NULL,
    -- Set once the broker acknowledged the event.
    accepted_at  TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

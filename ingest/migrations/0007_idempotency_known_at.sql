-- A retried push gets the first answer whole: its event id and, when the
-- broker stamped the event with its log-append time, that known-at time.
ALTER TABLE idempotency_keys ADD COLUMN known_at TIMESTAMPTZ;

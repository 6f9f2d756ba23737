-- Monthly request counts, reconciled from Redis so a Redis restart or flush
-- does not reset anyone's allowance. `used` only grows within a month.
CREATE TABLE usage_months (
    subject    TEXT        NOT NULL,
    month      TEXT        NOT NULL,
    used       BIGINT      NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (subject, month)
);

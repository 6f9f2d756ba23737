-- Rate alerts and the webhooks they call, in a schema of their own: they
-- are users' settings, not a read-model generation, so a replay keeps them.
-- Owners are API keys, by their public prefix (the API's schema).

CREATE TABLE webhooks (
    id              UUID PRIMARY KEY,
    owner           TEXT        NOT NULL,
    url             TEXT        NOT NULL,
    description     TEXT        NOT NULL DEFAULT '',
    -- Signing secrets, sealed with the operators' key (HMAC needs the
    -- secret itself, so it cannot be hashed). After a rotation the previous
    -- one also signs until previous_until.
    secret          BYTEA       NOT NULL,
    previous_secret BYTEA,
    previous_until  TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Delivery health: failing since the first failure after a success;
    -- disabled after failing for a day.
    failing_since   TIMESTAMPTZ,
    last_error      TEXT,
    last_error_at   TIMESTAMPTZ,
    last_success_at TIMESTAMPTZ,
    disabled_at     TIMESTAMPTZ
);
CREATE INDEX webhooks_owner ON webhooks (owner, created_at);

CREATE TABLE alerts (
    id            UUID PRIMARY KEY,
    owner         TEXT        NOT NULL,
    webhook_id    UUID        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    currency      TEXT        NOT NULL,
    field         TEXT        NOT NULL CHECK (field IN ('cashBuying', 'cashSelling',
                                                        'transactionalBuying', 'transactionalSelling')),
    condition     TEXT        NOT NULL CHECK (condition IN ('above', 'below')),
    threshold     NUMERIC     NOT NULL,
    -- NULL: the best rate across active banks.
    bank_id       BIGINT,
    -- The watch it reads (`watches`): its bank, 0 for the best rate.
    watch_bank    BIGINT      NOT NULL,
    -- The watch's evaluations when the alert was made: until the next one
    -- its condition is not known (the first board that finds it true
    -- fires); after it, it held exactly when the watch's value met it.
    since         BIGINT      NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Counted by the deliverer as it turns crossings into messages.
    fired         BIGINT      NOT NULL DEFAULT 0,
    last_fired_at TIMESTAMPTZ
);
-- A board's crossings are a range of thresholds between the watch's old
-- and new values; alerts not known yet are those made since its last
-- evaluation.
CREATE INDEX alerts_thresholds ON alerts (currency, field, watch_bank, condition, threshold);
CREATE INDEX alerts_since ON alerts (currency, field, watch_bank, since);
CREATE INDEX alerts_owner ON alerts (owner, created_at);
CREATE INDEX alerts_webhook ON alerts (webhook_id);

-- What alerts watch: one rate of a currency at a bank (or the best across
-- active banks, bank 0), as it was at its last evaluation. Made with the
-- first alert on it. Every alert on a watch shares its value, so a board
-- changes one row here, whatever the number of alerts.
CREATE TABLE watches (
    currency    TEXT        NOT NULL,
    field       TEXT        NOT NULL,
    bank_id     BIGINT      NOT NULL,
    -- NULL: not quoted.
    value       NUMERIC,
    -- The bank quoting it (for the best rate, the best bank) and the as-of
    -- of its board.
    holder      BIGINT,
    updated_at  TIMESTAMPTZ,
    evaluations BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (currency, field, bank_id)
);

-- A board's crossings of one watch, recorded in the board's transaction:
-- the alerts it fired, with the values. The deliverer turns each into one
-- message per alert (id from alert and event) outside the fold, and
-- deletes it.
CREATE TABLE crossings (
    event_id    UUID        NOT NULL,
    currency    TEXT        NOT NULL,
    field       TEXT        NOT NULL,
    watch_bank  BIGINT      NOT NULL,
    alert_ids   UUID[]      NOT NULL,
    previous    NUMERIC,
    current     NUMERIC     NOT NULL,
    holder      BIGINT      NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (event_id, currency, field, watch_bank)
);

-- Every bank's latest quotes as alerts see them. Written only by the fold
-- that evaluates a log position first (see `positions`), so a replay
-- building another generation never moves them back; best-rate alerts
-- compare across banks here, whatever the generation's other partitions.
CREATE TABLE quote_banks (
    bank_id BIGINT PRIMARY KEY,
    code    TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    active  BOOLEAN NOT NULL
);
CREATE TABLE quotes (
    bank_id               BIGINT      NOT NULL,
    currency              TEXT        NOT NULL,
    cash_buying           NUMERIC,
    cash_selling          NUMERIC,
    transactional_buying  NUMERIC,
    transactional_selling NUMERIC,
    updated_at            TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (bank_id, currency)
);
CREATE INDEX quotes_currency ON quotes (currency);

-- Per partition, the first offset no fold has evaluated alerts for: each
-- log position is evaluated once, by whichever generation's fold gets
-- there first, in the same transaction as its effects.
CREATE TABLE positions (
    topic       TEXT   NOT NULL,
    partition   INT    NOT NULL,
    next_offset BIGINT NOT NULL,
    PRIMARY KEY (topic, partition)
);

-- The outbox: one row per message (`id` is its webhook-id, the same on
-- every attempt), delivered outside the fold.
CREATE TABLE deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      UUID        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    alert_id        UUID,
    owner           TEXT        NOT NULL,
    type            TEXT        NOT NULL,
    body            TEXT        NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts        INT         NOT NULL DEFAULT 0,
    leased_until    TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    failed_at       TIMESTAMPTZ,
    last_status     INT,
    last_error      TEXT,
    -- Offered to the live stream's `alert` events.
    streamed        BOOLEAN     NOT NULL DEFAULT FALSE
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX deliveries_unstreamed ON deliveries (created_at) WHERE NOT streamed;
CREATE INDEX deliveries_alert ON deliveries (alert_id)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX deliveries_webhook ON deliveries (webhook_id, next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX deliveries_finished ON deliveries (created_at)
    WHERE delivered_at IS NOT NULL OR failed_at IS NOT NULL;

-- Wakes the deliverers when there are crossings to expand or messages to
-- send: only for statements that inserted rows (a statement trigger fires
-- for none too, and the deliverer's own empty rounds would wake it again).
CREATE FUNCTION deliveries_added() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted) THEN
        PERFORM pg_notify('ratewire_deliveries', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER deliveries_added
    AFTER INSERT ON deliveries REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_added();
CREATE TRIGGER crossings_added
    AFTER INSERT ON crossings REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_added();

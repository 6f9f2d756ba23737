-- The read model: a fold of the event log. Everything here can be rebuilt by
-- replaying the topic from offset zero into an empty schema.

CREATE TABLE banks (
    id            BIGINT PRIMARY KEY,
    code          TEXT        NOT NULL,
    name          TEXT        NOT NULL,
    image_url     TEXT        NOT NULL,
    social_links  JSONB       NOT NULL DEFAULT '[]',
    active        BOOLEAN     NOT NULL DEFAULT TRUE,
    registered_at TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

-- Every currency any board has quoted, with its ISO 4217 English name.
CREATE TABLE currencies (
    code            CHAR(3) PRIMARY KEY,
    name            TEXT        NOT NULL,
    first_quoted_at TIMESTAMPTZ NOT NULL
);

-- One row per published board; a board re-published with the same as-of
-- replaces the earlier one (log order wins).
CREATE TABLE boards (
    bank_id  BIGINT      NOT NULL REFERENCES banks (id),
    as_of    TIMESTAMPTZ NOT NULL,
    event_id UUID        NOT NULL,
    PRIMARY KEY (bank_id, as_of)
);

-- Every published rate. The primary key serves both "latest/previous value
-- of a currency" and the history lookup "last value on or before T" with one
-- index range scan.
CREATE TABLE rates (
    bank_id               BIGINT      NOT NULL,
    currency              CHAR(3)     NOT NULL,
    as_of                 TIMESTAMPTZ NOT NULL,
    cash_buying           NUMERIC     NOT NULL,
    cash_selling          NUMERIC     NOT NULL,
    transactional_buying  NUMERIC,
    transactional_selling NUMERIC,
    PRIMARY KEY (bank_id, currency, as_of),
    FOREIGN KEY (bank_id, as_of) REFERENCES boards (bank_id, as_of) ON DELETE CASCADE
);
CREATE INDEX rates_by_board ON rates (bank_id, as_of);

-- Event ids already applied: a producer retry that wrote the same event
-- twice to the log changes nothing the second time.
CREATE TABLE applied_events (
    event_id   UUID PRIMARY KEY,
    partition  INTEGER     NOT NULL,
    "offset"   BIGINT      NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The consumer's position, written in the same transaction as the rows it
-- produced: this is what makes the projection exactly-once in effect.
CREATE TABLE consumer_offsets (
    topic       TEXT        NOT NULL,
    partition   INTEGER     NOT NULL,
    next_offset BIGINT      NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);

-- Messages that could not be decoded or applied; they never stop a partition.
CREATE TABLE dead_letters (
    id          BIGSERIAL PRIMARY KEY,
    topic       TEXT        NOT NULL,
    partition   INTEGER     NOT NULL,
    "offset"    BIGINT      NOT NULL,
    event_id    UUID,
    error       TEXT        NOT NULL,
    payload     BYTEA,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

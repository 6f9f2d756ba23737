-- Ingest's own state: the authority for bank ids and publisher tokens.
-- The read model learns about banks only from the events ingest publishes.

CREATE TABLE banks (
    id           BIGSERIAL PRIMARY KEY,
    code         TEXT        NOT NULL UNIQUE,
    name         TEXT        NOT NULL,
    image_url    TEXT        NOT NULL,
    social_links JSONB       NOT NULL DEFAULT '[]',
    active       BOOLEAN     NOT NULL DEFAULT TRUE,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A token is shown once; only its SHA-256 is kept. The prefix names it in
-- lists, logs and revocation without revealing it.
CREATE TABLE publisher_tokens (
    prefix     TEXT PRIMARY KEY,
    bank_id    BIGINT      NOT NULL REFERENCES banks (id),
    token_hash TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ
);
CREATE INDEX publisher_tokens_by_bank ON publisher_tokens (bank_id);

-- API keys: shown once at creation, kept only as a SHA-256 hash, named by a
-- short public prefix in lists, logs and revocation.
CREATE TABLE api_keys (
    prefix     TEXT PRIMARY KEY,
    key_hash   TEXT        NOT NULL UNIQUE,
    name       TEXT        NOT NULL,
    plan       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ
);

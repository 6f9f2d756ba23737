-- The reference days this ingest published, as published (the board in
-- currency order, as the log carries it): importing a day again with the
-- same values publishes nothing; with other values, a correction.
CREATE TABLE IF NOT EXISTS reference_imports (
    source       TEXT        NOT NULL,
    date         DATE        NOT NULL,
    board        JSONB       NOT NULL,
    event_id     UUID        NOT NULL,
    published_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, date)
);

-- The read model becomes bitemporal (docs/operations.md, "Known-at
-- times"). Valid time is a row's as-of (or a bank's and a reference day's
-- own time); transaction time is when the fold learned it: the known-at
-- time of the event that wrote the row, [known_from, known_to). A revision
-- (a correction, a retraction, a bank changed, a reference day published
-- again) closes the interval of the row it revises instead of deleting or
-- updating it, so the model as known at any instant can still be read.
--
-- The tables take the name *_versions. Views under the old names show the
-- rows in force as known at `ratewire.known_at` (a transaction's setting,
-- see ratewire_known_at()); unset, that is every row not yet closed, so
-- every reader's SQL is unchanged and reads the model as it is now. A
-- reader that sets it reads the model as it was known then, with the same
-- SQL.

-- The instant the views read the model as known at: 'infinity' (now, with
-- everything folded) unless the transaction set `ratewire.known_at`.
-- The views call it in a scalar subquery, evaluated once per statement
-- instead of once per row.
CREATE OR REPLACE FUNCTION ratewire_known_at() RETURNS TIMESTAMPTZ
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(NULLIF(current_setting('ratewire.known_at', true), '')::timestamptz,
                    'infinity'::timestamptz)
$$;

-- Banks: a change closes the bank's row and adds one. The history
-- revision (migration 0003) is bookkeeping for the series cache, not a
-- fact about the bank, and is kept apart, one counter per bank.
ALTER TABLE boards DROP CONSTRAINT IF EXISTS boards_bank_id_fkey;
ALTER TABLE banks RENAME TO bank_versions;
ALTER TABLE bank_versions DROP CONSTRAINT IF EXISTS banks_pkey;
ALTER TABLE bank_versions
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    ADD COLUMN known_to TIMESTAMPTZ;
ALTER TABLE bank_versions ALTER COLUMN known_from DROP DEFAULT;
CREATE INDEX bank_versions_by_id ON bank_versions (id, known_from);
CREATE TABLE bank_history_revs (
    bank_id     BIGINT PRIMARY KEY,
    history_rev BIGINT NOT NULL
);
INSERT INTO bank_history_revs (bank_id, history_rev)
SELECT id, history_rev FROM bank_versions WHERE history_rev <> 0;
ALTER TABLE bank_versions DROP COLUMN history_rev;

CREATE VIEW banks AS
SELECT b.id, b.code, b.name, b.image_url, b.social_links, b.active, b.registered_at,
       b.updated_at, COALESCE(h.history_rev, 0) AS history_rev
FROM bank_versions b
LEFT JOIN bank_history_revs h ON h.bank_id = b.id
WHERE b.known_from <= (SELECT ratewire_known_at())
  AND (b.known_to IS NULL OR b.known_to > (SELECT ratewire_known_at()));

-- Boards, with where each came from: when ingest received it, where it is
-- on the log, the publisher's source and reason, and the event that
-- closed it (a correction's or a retraction's).
ALTER TABLE boards RENAME TO board_versions;
ALTER TABLE board_versions DROP CONSTRAINT IF EXISTS boards_pkey;
ALTER TABLE board_versions
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    ADD COLUMN known_to TIMESTAMPTZ,
    ADD COLUMN closed_by UUID,
    ADD COLUMN received_at TIMESTAMPTZ,
    ADD COLUMN log_partition INTEGER,
    ADD COLUMN log_offset BIGINT,
    ADD COLUMN source JSONB,
    ADD COLUMN reason TEXT;
ALTER TABLE board_versions ALTER COLUMN known_from DROP DEFAULT;
-- Not unique: a board and its correction folded in the same millisecond
-- leave a version whose interval is empty beside the one in force.
CREATE INDEX board_versions_by_key ON board_versions (bank_id, as_of);
-- The revision log: closed versions, by when they were closed.
CREATE INDEX board_versions_revised ON board_versions (known_to, closed_by)
    WHERE closed_by IS NOT NULL;

CREATE VIEW boards AS
SELECT bank_id, as_of, event_id, currencies
FROM board_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

-- Each bank's latest as-of, as it moved (NULL: no board in force): a
-- bank's latest board as known at any instant is one probe here, where
-- looking for it among the boards would pass every board not yet known
-- then (a backfilled year, say). Kept by the fold beside the boards.
CREATE TABLE bank_latest_versions (
    bank_id    BIGINT      NOT NULL,
    as_of      TIMESTAMPTZ,
    known_from TIMESTAMPTZ NOT NULL,
    known_to   TIMESTAMPTZ
);
CREATE INDEX bank_latest_versions_by_bank ON bank_latest_versions (bank_id, known_from);
INSERT INTO bank_latest_versions (bank_id, as_of, known_from)
SELECT bank_id, max(as_of), '-infinity' FROM board_versions GROUP BY bank_id;

-- Read as `ORDER BY known_from DESC LIMIT 1` for a bank: the version in
-- force is the last one known by the instant.
CREATE VIEW bank_latest AS
SELECT bank_id, as_of, known_from
FROM bank_latest_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

-- Rates carry their board's interval (closed with it).
ALTER TABLE rates RENAME TO rate_versions;
ALTER TABLE rate_versions DROP CONSTRAINT IF EXISTS rates_pkey;
ALTER TABLE rate_versions
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    ADD COLUMN known_to TIMESTAMPTZ;
ALTER TABLE rate_versions ALTER COLUMN known_from DROP DEFAULT;
CREATE INDEX rate_versions_by_key ON rate_versions (bank_id, currency, as_of);

CREATE VIEW rates AS
SELECT bank_id, currency, as_of, cash_buying, cash_selling,
       transactional_buying, transactional_selling
FROM rate_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

-- A currency is known from the first board that quoted it (folds of
-- different partitions lower both times, whichever commits first).
ALTER TABLE currencies RENAME TO currencies_known;
ALTER TABLE currencies_known
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity';
ALTER TABLE currencies_known ALTER COLUMN known_from DROP DEFAULT;

CREATE VIEW currencies AS
SELECT code, name, first_quoted_at
FROM currencies_known
WHERE known_from <= (SELECT ratewire_known_at());

-- A retraction is known from its event's known-at time.
ALTER TABLE retracted_boards
    ADD COLUMN known_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity';
ALTER TABLE retracted_boards ALTER COLUMN known_at DROP DEFAULT;
CREATE INDEX retracted_boards_by_retraction ON retracted_boards (retracted_by);

-- Reference days: a day published again closes the one before.
ALTER TABLE reference_rates DROP CONSTRAINT IF EXISTS reference_rates_source_date_fkey;
ALTER TABLE reference_rates DROP CONSTRAINT IF EXISTS reference_rates_pkey;
ALTER TABLE reference_boards DROP CONSTRAINT IF EXISTS reference_boards_pkey;
ALTER TABLE reference_boards RENAME TO reference_board_versions;
ALTER TABLE reference_rates RENAME TO reference_rate_versions;
ALTER TABLE reference_board_versions
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    ADD COLUMN known_to TIMESTAMPTZ;
ALTER TABLE reference_board_versions ALTER COLUMN known_from DROP DEFAULT;
ALTER TABLE reference_rate_versions
    ADD COLUMN known_from TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    ADD COLUMN known_to TIMESTAMPTZ;
ALTER TABLE reference_rate_versions ALTER COLUMN known_from DROP DEFAULT;
CREATE INDEX reference_board_versions_by_key ON reference_board_versions (source, date);
CREATE INDEX reference_rate_versions_by_key ON reference_rate_versions (source, date, currency);

CREATE VIEW reference_boards AS
SELECT source, date, event_id, published_at
FROM reference_board_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

CREATE VIEW reference_rates AS
SELECT source, date, currency, buying, selling, weighted_average
FROM reference_rate_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

-- Each partition's fold: the known-at time of the last event folded (the
-- next one's is never earlier), and the last time the fold was seen to
-- have read everything the broker held (settled_at). An answer as known
-- at T is final once every partition has passed T (docs/operations.md).
ALTER TABLE consumer_offsets
    ADD COLUMN known_at TIMESTAMPTZ,
    ADD COLUMN settled_at TIMESTAMPTZ;

-- Raw history by UTC month, so that `RATEWIRE_RAW_HISTORY_RETENTION`
-- drops whole months (a DROP TABLE, where deleting rows would leave
-- the space to vacuum and the indexes to bloat).
--
-- `board_versions` becomes a table partitioned by range of `as_of`; each
-- partition is listed in `board_months`. The fold holds the row of each
-- month it writes to (FOR KEY SHARE), and a purge deletes the row before
-- it drops the month, so a purge never drops a month under a fold.
-- The boards stored before this migration are attached as they are, as
-- one partition ending at the month after the newest of them.
CREATE TABLE board_months (
    starts TIMESTAMPTZ PRIMARY KEY,
    ends TIMESTAMPTZ NOT NULL,
    partition TEXT NOT NULL UNIQUE,
    CHECK (starts < ends)
);

-- Each board that others are stored against, in full. A board's base is
-- in the same UTC month (fold/stored.rs); the readers find it by event id
-- here, one probe they cache per base, where a probe through the months
-- is pruned at run time once per board and cost a five-year range three
-- times its reading (docs/benchmarks.md). Bases are a few in a hundred
-- boards of the demo's mix, and none where every value changes.
CREATE TABLE board_bases (
    event_id UUID PRIMARY KEY,
    as_of TIMESTAMPTZ NOT NULL,
    currencies CHAR(3)[] NOT NULL,
    cash_buying NUMERIC[] NOT NULL,
    cash_selling NUMERIC[] NOT NULL,
    transactional_buying NUMERIC[] NOT NULL,
    transactional_selling NUMERIC[] NOT NULL
);
CREATE INDEX board_bases_by_time ON board_bases (as_of);

INSERT INTO board_bases
SELECT DISTINCT ON (x.event_id) x.event_id, x.as_of, x.currencies, x.cash_buying,
       x.cash_selling, x.transactional_buying, x.transactional_selling
FROM board_versions x
WHERE x.event_id IN (SELECT base_event_id FROM board_versions WHERE base_event_id IS NOT NULL)
  AND x.base_event_id IS NULL;

-- A projector of an older build copies no base into `board_bases`, so
-- the boards it stored against one would read as missing values. The
-- base's column is renamed: such a projector's statements now fail with
-- an error it retries (not one it dead-letters), and its partitions wait,
-- nothing lost, until it is replaced.
ALTER TABLE board_versions RENAME COLUMN base_event_id TO base_id;

-- The names move to the partitioned table; the old table's indexes are
-- attached to its, as they are, with the old table.
ALTER INDEX board_versions_by_key RENAME TO board_versions_unpartitioned_by_key;
ALTER INDEX board_versions_by_known RENAME TO board_versions_unpartitioned_by_known;
ALTER INDEX board_versions_revised RENAME TO board_versions_unpartitioned_revised;
ALTER INDEX boards_event_id RENAME TO board_versions_unpartitioned_event_id;
DROP TRIGGER boards_need_currencies ON board_versions;
ALTER TABLE board_versions RENAME TO board_versions_unpartitioned;

CREATE TABLE board_versions (
    LIKE board_versions_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS
) PARTITION BY RANGE (as_of);
CREATE INDEX board_versions_by_key ON board_versions (bank_id, as_of);
CREATE INDEX board_versions_by_known ON board_versions (bank_id, known_from);
CREATE INDEX board_versions_revised ON board_versions (known_to, closed_by)
    WHERE closed_by IS NOT NULL;
CREATE INDEX boards_event_id ON board_versions (event_id);
CREATE TRIGGER boards_need_currencies BEFORE INSERT ON board_versions
    FOR EACH ROW WHEN (NEW.currencies IS NULL) EXECUTE FUNCTION boards_need_currencies();

-- The views are bound to the table they were made on: made again, on the
-- partitioned one, with a base read from `board_bases`.
CREATE OR REPLACE VIEW rate_versions AS
SELECT b.bank_id, q.currency, b.as_of,
       CASE WHEN q.cash_buying IS NULL THEN s.cash_buying[p.n]
            ELSE q.cash_buying END AS cash_buying,
       CASE WHEN q.cash_buying IS NULL THEN s.cash_selling[p.n]
            ELSE q.cash_selling END AS cash_selling,
       CASE WHEN q.cash_buying IS NULL THEN s.transactional_buying[p.n]
            ELSE q.transactional_buying END AS transactional_buying,
       CASE WHEN q.cash_buying IS NULL THEN s.transactional_selling[p.n]
            ELSE q.transactional_selling END AS transactional_selling,
       b.known_from, b.known_to
FROM board_versions b
LEFT JOIN LATERAL (SELECT x.currencies, x.cash_buying, x.cash_selling, x.transactional_buying,
                          x.transactional_selling
                   FROM board_bases x
                   WHERE b.base_id IS NOT NULL AND x.event_id = b.base_id
                   LIMIT 1) s ON true
CROSS JOIN LATERAL unnest(b.currencies, b.cash_buying, b.cash_selling,
                          b.transactional_buying, b.transactional_selling)
    AS q (currency, cash_buying, cash_selling, transactional_buying, transactional_selling)
CROSS JOIN LATERAL (SELECT array_position(s.currencies, q.currency) AS n OFFSET 0) p;

CREATE OR REPLACE VIEW boards AS
SELECT bank_id, as_of, event_id, currencies, widest_spread, cash_buying, cash_selling,
       transactional_buying, transactional_selling, base_id AS base_event_id
FROM board_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

CREATE OR REPLACE FUNCTION rates_of(code CHAR(3))
RETURNS TABLE (bank_id BIGINT, currency CHAR(3), as_of TIMESTAMPTZ, cash_buying NUMERIC,
               cash_selling NUMERIC, transactional_buying NUMERIC,
               transactional_selling NUMERIC)
LANGUAGE sql STABLE AS $$
    SELECT b.bank_id, code, b.as_of,
           CASE WHEN b.cash_buying[p.i] IS NULL THEN s.cb ELSE b.cash_buying[p.i] END,
           CASE WHEN b.cash_buying[p.i] IS NULL THEN s.cs ELSE b.cash_selling[p.i] END,
           CASE WHEN b.cash_buying[p.i] IS NULL THEN s.tb ELSE b.transactional_buying[p.i] END,
           CASE WHEN b.cash_buying[p.i] IS NULL THEN s.ts ELSE b.transactional_selling[p.i] END
    FROM boards b
    CROSS JOIN LATERAL (SELECT array_position(b.currencies, code) AS i OFFSET 0) p
    LEFT JOIN LATERAL (SELECT x.cash_buying[n.j] AS cb, x.cash_selling[n.j] AS cs,
                              x.transactional_buying[n.j] AS tb,
                              x.transactional_selling[n.j] AS ts
                       FROM board_bases x
                       CROSS JOIN LATERAL (SELECT array_position(x.currencies, code) AS j
                                           OFFSET 0) n
                       WHERE x.event_id = b.base_event_id
                       LIMIT 1) s ON true
    WHERE p.i IS NOT NULL
$$;

-- The old table joins as the months up to the one after its newest
-- board; an empty one goes. Only after the views above, which were
-- bound to it.
DO $$
DECLARE
    newest TIMESTAMPTZ;
    ends TIMESTAMPTZ;
    name TEXT;
BEGIN
    SELECT max(as_of) INTO newest FROM board_versions_unpartitioned;
    IF newest IS NULL THEN
        DROP TABLE board_versions_unpartitioned;
        RETURN;
    END IF;
    ends := (date_trunc('month', newest AT TIME ZONE 'UTC') + interval '1 month')
            AT TIME ZONE 'UTC';
    name := 'board_versions_before_' || to_char(ends AT TIME ZONE 'UTC', 'YYYY_MM');
    EXECUTE format('ALTER TABLE board_versions_unpartitioned RENAME TO %I', name);
    EXECUTE format('ALTER TABLE board_versions ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                   name, ends);
    INSERT INTO board_months (starts, ends, partition) VALUES ('-infinity', ends, name);
END
$$;

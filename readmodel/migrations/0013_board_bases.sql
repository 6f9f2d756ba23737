-- A board that repeats most of its bank's latest values stores only what
-- changed: the rest is read from a base, a board of the same bank stored
-- in full in the same UTC month, named by its event id (an event's values
-- are the same in each of its versions). A value read from the base is
-- NULL in all four arrays; a cash value is never absent otherwise. The
-- projector decides which boards are stored this way (fold/stored.rs);
-- the views and `rates_of` below give every reader the values in full, so
-- readers' SQL is unchanged.
ALTER TABLE board_versions ADD COLUMN base_event_id UUID;

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
                   FROM board_versions x
                   WHERE b.base_event_id IS NOT NULL AND x.event_id = b.base_event_id
                   LIMIT 1) s ON true
CROSS JOIN LATERAL unnest(b.currencies, b.cash_buying, b.cash_selling,
                          b.transactional_buying, b.transactional_selling)
    AS q (currency, cash_buying, cash_selling, transactional_buying, transactional_selling)
CROSS JOIN LATERAL (SELECT array_position(s.currencies, q.currency) AS n OFFSET 0) p;

CREATE OR REPLACE VIEW boards AS
SELECT bank_id, as_of, event_id, currencies, widest_spread, cash_buying, cash_selling,
       transactional_buying, transactional_selling, base_event_id
FROM board_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

-- A board's value of `code` is read from its base where it is not stored.
-- The base is probed by event id for every board (a full board's NULL
-- finds nothing), as the planner caches the probe by base (Memoize): a
-- range of boards costs one probe per base it reads, where a probe gated
-- on the value being absent was cached by value and base alike.
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
                       FROM board_versions x
                       CROSS JOIN LATERAL (SELECT array_position(x.currencies, code) AS j
                                           OFFSET 0) n
                       WHERE x.event_id = b.base_event_id
                       LIMIT 1) s ON true
    WHERE p.i IS NOT NULL
$$;

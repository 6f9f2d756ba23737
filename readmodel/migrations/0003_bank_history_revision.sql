-- Bumped whenever the fold writes a board at or before the bank's latest
-- as-of (a backfilled board, or one re-published for the same as-of): the
-- only writes that change a bank's history behind its newest row. Whoever
-- keeps derived history (the best-rates series kept between recomputations)
-- reads only the rows after what it has seen, and starts again from scratch
-- when this number moves.
ALTER TABLE banks ADD COLUMN IF NOT EXISTS history_rev BIGINT NOT NULL DEFAULT 0;

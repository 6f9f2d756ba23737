-- A board's currencies, kept on its row. A board's rates are then found by
-- the rates' primary key (bank, currency, as-of), one probe per currency,
-- and the rates need no second index: the index on (bank, as-of) cost
-- every rate row an index insert of its own, half the index work on the
-- fold's largest table (docs/benchmarks.md, run 39).
ALTER TABLE boards ADD COLUMN IF NOT EXISTS currencies CHAR(3)[];
-- Existing boards, read through the index about to go. On a long history
-- this reads every rate once, in the migration's one transaction
-- (docs/operations.md, "Upgrading to board currencies").
UPDATE boards b
SET currencies = ARRAY(SELECT r.currency FROM rates r
                       WHERE r.bank_id = b.bank_id AND r.as_of = b.as_of
                       ORDER BY r.currency)
WHERE b.currencies IS NULL;
ALTER TABLE boards ALTER COLUMN currencies SET NOT NULL;
DROP INDEX IF EXISTS rates_by_board;

-- A projector from before this migration still running beside it (a
-- rolling deploy) writes boards without their currencies. The NOT NULL
-- above would refuse them as bad data, and the projector would dead-letter
-- good events; this refuses them with an error a projector retries
-- instead (not of SQLSTATE class 22 or 23), so its partitions wait, with
-- nothing lost, until it is replaced.
-- The WHEN clause keeps the function out of every good board's insert.
CREATE OR REPLACE FUNCTION boards_need_currencies() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a board without its currencies: this projector predates read-model migration 6; replace it with the current build'
        USING ERRCODE = 'object_not_in_prerequisite_state';
END
$$;
DROP TRIGGER IF EXISTS boards_need_currencies ON boards;
CREATE TRIGGER boards_need_currencies BEFORE INSERT ON boards
    FOR EACH ROW WHEN (NEW.currencies IS NULL) EXECUTE FUNCTION boards_need_currencies();

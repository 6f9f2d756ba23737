-- Each board's screen, kept by the fold (readmodel quality::screen): its
-- widest spread percent and its values' largest move from the bank's
-- previous ones, so that a quality report reads one row per board and
-- the rates of only the boards that may breach the cap or hold an
-- outlier. NULL (boards stored before this, among others) means "judge
-- on the rates".
ALTER TABLE board_versions
    ADD COLUMN widest_spread NUMERIC,
    ADD COLUMN largest_move NUMERIC;

CREATE OR REPLACE VIEW boards AS
SELECT bank_id, as_of, event_id, currencies, widest_spread
FROM board_versions
WHERE known_from <= (SELECT ratewire_known_at())
  AND (known_to IS NULL OR known_to > (SELECT ratewire_known_at()));

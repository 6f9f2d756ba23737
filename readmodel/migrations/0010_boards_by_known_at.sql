-- The boards a bank published in a window of known-at times (its quality
-- report): found by bank and known-at time instead of by passing every
-- board of the bank.
CREATE INDEX board_versions_by_known ON board_versions (bank_id, known_from);

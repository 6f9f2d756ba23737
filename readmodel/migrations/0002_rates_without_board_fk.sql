-- The foreign key from rates to boards ran a trigger and an index probe for
-- every rate row, more than half the cost of folding a board (measured: 300k
-- rows in 4.1 s with it, 1.7 s without). Only the fold writes these tables,
-- and it inserts a board before its rates and deletes a replaced board's
-- rates itself, so the key guarded nothing the fold does not.
ALTER TABLE rates DROP CONSTRAINT IF EXISTS rates_bank_id_as_of_fkey;

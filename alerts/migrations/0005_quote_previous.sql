-- Each quote's previous values (the bank's last before its latest board's),
-- so that best-rate alerts leave outliers out as best-rates does. NULL:
-- none, or not known yet (set by the bank's next board).
ALTER TABLE quotes
    ADD COLUMN previous_cash_buying          NUMERIC,
    ADD COLUMN previous_cash_selling         NUMERIC,
    ADD COLUMN previous_transactional_buying  NUMERIC,
    ADD COLUMN previous_transactional_selling NUMERIC;

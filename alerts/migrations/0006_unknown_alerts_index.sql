-- Alerts not known yet are found by their `since` (the newest per watch,
-- then those equal to it). The index that served this had the same first
-- columns as `alerts_thresholds`, so a plan made while the table was small
-- could read a crossing's thresholds through it, filtering every alert of
-- the watch (3 ms a board at 10,000 alerts, until the next ANALYZE). As a
-- partial index it serves only statements that repeat its predicate,
-- which the thresholds' reads do not.
DROP INDEX alerts_since;
CREATE INDEX alerts_unknown ON alerts (currency, field, watch_bank, since) WHERE since >= 0;

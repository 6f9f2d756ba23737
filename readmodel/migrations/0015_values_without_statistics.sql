-- No plan filters or joins on a board's arrays of values: they are read
-- by position and returned. ANALYZE still sampled them, element by
-- element, and that was most of a replay's statistics (docs/benchmarks.md,
-- "Issue 62's targets"). A target of 0 leaves them out. On the partitioned
-- table it reaches every month there is; each month made later is given it
-- too (readmodel board_months).
ALTER TABLE board_versions
    ALTER COLUMN cash_buying SET STATISTICS 0,
    ALTER COLUMN cash_selling SET STATISTICS 0,
    ALTER COLUMN transactional_buying SET STATISTICS 0,
    ALTER COLUMN transactional_selling SET STATISTICS 0;
ALTER TABLE board_bases
    ALTER COLUMN cash_buying SET STATISTICS 0,
    ALTER COLUMN cash_selling SET STATISTICS 0,
    ALTER COLUMN transactional_buying SET STATISTICS 0,
    ALTER COLUMN transactional_selling SET STATISTICS 0;

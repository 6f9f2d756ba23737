-- Retention (docs/operations.md): applied event ids are kept only as long
-- as a duplicate could still arrive, and dead letters an operator resolved
-- only for a while; unresolved dead letters are kept until someone acts.
CREATE INDEX IF NOT EXISTS applied_events_applied_at ON applied_events (applied_at);
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS resolved_at TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS dead_letters_resolved_at ON dead_letters (resolved_at)
    WHERE resolved_at IS NOT NULL;

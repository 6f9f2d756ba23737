-- A bank's publishing schedule (its JSON form, see ratewire_proto::schedule),
-- versioned with the rest of the bank's row; null when it has none.
ALTER TABLE bank_versions ADD COLUMN schedule JSONB;

CREATE OR REPLACE VIEW banks AS
SELECT b.id, b.code, b.name, b.image_url, b.social_links, b.active, b.registered_at,
       b.updated_at, COALESCE(h.history_rev, 0) AS history_rev, b.schedule
FROM bank_versions b
LEFT JOIN bank_history_revs h ON h.bank_id = b.id
WHERE b.known_from <= (SELECT ratewire_known_at())
  AND (b.known_to IS NULL OR b.known_to > (SELECT ratewire_known_at()));

-- A bank's publishing schedule (its JSON form, see ratewire_proto::schedule),
-- null when it has none. It travels on the log with the bank's metadata, so
-- the log registry restores it with the rest.
ALTER TABLE banks ADD COLUMN schedule JSONB;
ALTER TABLE log_banks ADD COLUMN schedule JSONB;

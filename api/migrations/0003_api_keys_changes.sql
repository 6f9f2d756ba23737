-- Every change to a key reaches each API instance at once (its directory of
-- live keys, see api/src/key_directory.rs), whoever made it: an instance,
-- the CLI, or SQL by hand. The payload names the schema, so deployments
-- sharing a database tell their keys apart.
CREATE FUNCTION api_keys_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('ratewire_api_keys', json_build_object(
            'schema', TG_TABLE_SCHEMA, 'prefix', OLD.prefix, 'hash', OLD.key_hash,
            'live', false)::text);
    ELSE
        PERFORM pg_notify('ratewire_api_keys', json_build_object(
            'schema', TG_TABLE_SCHEMA, 'prefix', NEW.prefix, 'hash', NEW.key_hash,
            'live', NEW.revoked_at IS NULL)::text);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER api_keys_changed
    AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_changed();

-- outbox_emit: write an outbox event as a logical decoding message instead of
-- an outbox table row (the "message outbox").
--
-- Install (idempotent: CREATE OR REPLACE), connected to the database the
-- service writes to, as the role that owns the service's schema:
--   psql -d app -f deploy/postgresql/outbox_emit.sql
-- The function lands in the first schema of the search_path (usually
-- public). PostgreSQL 14 to 18; gen_random_uuid() is core since 13, and
-- pgoutput hands messages to a client from 14.
--
-- Use it inside the business transaction, next to the writes it describes:
--   BEGIN;
--   UPDATE orders SET state = 'placed' WHERE id = 42;
--   SELECT outbox_emit('Order', '42', 'OrderPlaced', '{"total": 10}');
--   COMMIT;
-- It returns the message's LSN (pg_logical_emit_message's result).
--
-- What it writes: one TRANSACTIONAL message (prefix 'outbox' unless given)
-- whose content is the JSON text of
--   jsonb_build_object('id', gen_random_uuid()::text,
--                      'aggregatetype', aggregatetype,
--                      'aggregateid', aggregateid,
--                      'type', type,
--                      'payload', payload)
-- i.e. the columns of Debezium's outbox table as the members of one JSON
-- object (in jsonb's own key order). The message is decoded at the commit,
-- in commit order with the rest of the transaction, and vanishes with a
-- rollback, exactly like an outbox row. Never use
-- pg_logical_emit_message(false, ...) for events: a non-transactional
-- message is written to the WAL at once and published even when the
-- transaction rolls back (walrelay refuses those by default,
-- non_transactional = "error").
--
-- The caller needs no table, no INSERT privilege and no vacuum of an outbox
-- table: the event exists only in the WAL, until every slot has passed it.
-- Executing pg_logical_emit_message is granted to PUBLIC by default.
--
-- Who reads it:
--   walrelay, native TOML:
--     [outbox]
--     source = "messages"           # or "both" with an outbox table too
--     message_prefixes = ["outbox"] # the prefix passed here
--   walrelay connect-standalone / Debezium 3.x PostgreSQL connector:
--     plugin.name=pgoutput
--     publication.autocreate.mode=no_tables
--     message.prefix.include.list=outbox
--     transforms=decode,outbox
--     transforms.decode.type=io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent
--     transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
--
-- NULLs: a NULL aggregateid gives a record without a key, a NULL payload a
-- JSON null (a tombstone with route_tombstone_on_empty_payload); a NULL
-- aggregatetype (the topic) or prefix is refused here, in the caller's
-- transaction, instead of stopping the relay later (pg_logical_emit_message
-- is strict: a NULL prefix would silently emit nothing).

CREATE OR REPLACE FUNCTION outbox_emit(
    aggregatetype text,
    aggregateid text,
    type text,
    payload jsonb,
    prefix text DEFAULT 'outbox'
) RETURNS pg_lsn
LANGUAGE plpgsql
VOLATILE
-- Only catalog functions are called: a caller's search_path cannot
-- substitute them.
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF outbox_emit.prefix IS NULL OR outbox_emit.prefix = '' THEN
        RAISE EXCEPTION 'outbox_emit: prefix must not be null or empty';
    END IF;
    IF outbox_emit.aggregatetype IS NULL THEN
        RAISE EXCEPTION 'outbox_emit: aggregatetype must not be null (it names the topic)';
    END IF;
    RETURN pg_logical_emit_message(
        true,
        outbox_emit.prefix,
        jsonb_build_object(
            'id', gen_random_uuid()::text,
            'aggregatetype', outbox_emit.aggregatetype,
            'aggregateid', outbox_emit.aggregateid,
            'type', outbox_emit.type,
            'payload', outbox_emit.payload
        )::text
    );
END
$$;

COMMENT ON FUNCTION outbox_emit(text, text, text, jsonb, text) IS
    'Emits one transactional logical decoding message (prefix default outbox) whose content is the outbox event as a '
    'JSON object (id, aggregatetype, aggregateid, type, payload); returns its LSN. See deploy/postgresql/outbox_emit.sql.';

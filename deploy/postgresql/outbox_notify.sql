-- walrelay's polling source (`[source] kind = "poll"`): wake walrelay as
-- soon as outbox rows commit, instead of at its next poll.
--
-- A statement-level trigger sends one NOTIFY per inserting statement on the
-- channel walrelay LISTENs on (`poll.listen_channel`). PostgreSQL delivers a
-- notification only when the inserting transaction commits, and folds
-- identical notifications of one transaction into one, so a transaction that
-- inserts many rows costs one notification. Without the trigger (or when a
-- notification is lost, say while walrelay reconnects) walrelay still polls
-- every `poll.interval_ms`.
--
-- Usage: psql -v table=public.outbox -v channel=walrelay_outbox -f outbox_notify.sql
-- (defaults: public.outbox and walrelay_outbox). Run it as the table's owner.

\if :{?table}
\else
\set table public.outbox
\endif
\if :{?channel}
\else
\set channel walrelay_outbox
\endif

CREATE OR REPLACE FUNCTION walrelay_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- TG_ARGV[0]: the channel; the payload is empty (walrelay claims rows by
    -- its own query, never from the notification).
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS walrelay_outbox_notify ON :table;
CREATE TRIGGER walrelay_outbox_notify
    AFTER INSERT ON :table
    FOR EACH STATEMENT
    EXECUTE FUNCTION walrelay_outbox_notify(:'channel');

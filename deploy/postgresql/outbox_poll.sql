-- An outbox table for walrelay's polling source (`[source] kind = "poll"`,
-- config/walrelay-poll.toml): no replication slot, no wal_level = logical,
-- no REPLICATION attribute. walrelay claims unpublished rows
--   SELECT ... FROM public.outbox WHERE published_at IS NULL
--   ORDER BY seq LIMIT <poll.batch_size> FOR UPDATE SKIP LOCKED
-- produces them to Kafka, and once Kafka acknowledged every one sets
-- published_at in the same transaction (or deletes them, with
-- poll.on_publish = "delete").
--
-- Install (idempotent), connected to the application's database as the
-- role that owns the application's schema:
--   psql -d app -v role=walrelay -f deploy/postgresql/outbox_poll.sql
-- `role` (default walrelay) is the role walrelay connects as; it is created
-- (LOGIN, nothing else) when missing: set its password afterwards with
-- psql's \password, never in this file. Replace public.outbox with your
-- table and keep it in sync with [outbox] table.
--
-- To be woken as soon as a row commits instead of at the next
-- poll.interval_ms, add the LISTEN trigger of
-- deploy/postgresql/outbox_notify.sql and set poll.listen_channel:
--   psql -d app -v table=public.outbox -v channel=walrelay_outbox \
--        -f deploy/postgresql/outbox_notify.sql

\if :{?role}
\else
\set role walrelay
\endif

CREATE TABLE IF NOT EXISTS public.outbox (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The claim order (poll.order_by = ["seq"]). It must come from a
    -- sequence (an identity column), not from `created_at timestamptz
    -- DEFAULT now()`:
    -- - now() is the time the inserting *transaction began*, not when the
    --   row was written or committed. Two transactions on one aggregate are
    --   serialized by the aggregate's row lock, so the second one's outbox
    --   row commits after the first's; but if the second began first, its
    --   now() is earlier, and a claim that finds both unpublished sends the
    --   aggregate's events in the wrong order. A sequence value is taken
    --   when the row is inserted, after the business write took its locks,
    --   so it follows the order in which one aggregate's transactions
    --   commit (insert the outbox row after the write it describes).
    -- - now() is the same for every row of a transaction, so their order is
    --   a tie that ORDER BY leaves undefined; nextval() is strictly
    --   increasing, also within a transaction.
    -- - Clocks step (NTP, a failover to another machine) and have only
    --   microsecond resolution; a sequence never goes back (after a
    --   failover it jumps ahead, never behind).
    -- Concurrent transactions still commit their sequence values out of
    -- order; that only interleaves different aggregates, and nothing is
    -- skipped: the claim reads every unpublished row, not "seq above the
    -- last one". GENERATED ALWAYS refuses explicit values, so no writer
    -- can bypass the sequence.
    seq           bigint      GENERATED ALWAYS AS IDENTITY,
    -- The Debezium outbox columns, as [router] names them by default.
    aggregatetype varchar(255) NOT NULL,   -- routes to outbox.event.<aggregatetype>
    aggregateid   varchar(255) NOT NULL,   -- the record key, and the shard key (poll.shard_column)
    type          varchar(255) NOT NULL,   -- e.g. [router] additional_placement = "type:header:eventType"
    payload       jsonb,                   -- the record value
    -- Optional headers: any column can become a Kafka header through
    -- [router] additional_placement ("<column>:header:<name>"), and this
    -- one is Debezium's tracing span context (router.tracing_span_context_field).
    tracingspancontext varchar(256),
    -- The published marker (poll.published_column): NULL until Kafka
    -- acknowledged the row. Unused with poll.on_publish = "delete".
    published_at  timestamptz NULL,
    -- Only for the backlog age (poll.created_column = "created_at", the
    -- metric walrelay_poll_oldest_unpublished_age_seconds); never for the
    -- order, see seq. clock_timestamp(): when the row was written.
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The claim's index: only unpublished rows, in claim order. It stays as
-- small as the backlog however many published rows the table keeps (until
-- retention, poll.retention_seconds, deletes them). The predicate must be
-- the claim's WHERE (published_at IS NULL) for the planner to use it.
-- (With poll.on_publish = "delete" the claim has no WHERE and cannot use
-- a partial index: index seq itself, CREATE INDEX ON public.outbox (seq).)
CREATE INDEX IF NOT EXISTS outbox_unpublished_seq_idx
    ON public.outbox (seq) WHERE published_at IS NULL;
-- With poll.retention_seconds, retention looks published rows up by
-- published_at; an index keeps each pass from scanning the table:
-- CREATE INDEX IF NOT EXISTS outbox_published_at_idx
--     ON public.outbox (published_at) WHERE published_at IS NOT NULL;

-- The role: created when missing, with LOGIN only (the polling source opens
-- no replication connection).
SELECT format('CREATE ROLE %I LOGIN', :'role')
    WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = :'role')
\gexec

-- SELECT reads the rows; UPDATE is needed for SELECT ... FOR UPDATE (the
-- claim's row locks) and for setting published_at. The shard locks
-- (pg_try_advisory_lock) and LISTEN need no privilege.
GRANT USAGE ON SCHEMA public TO :"role";
GRANT SELECT, UPDATE ON TABLE public.outbox TO :"role";
-- DELETE only with poll.on_publish = "delete" (rows are deleted instead of
-- marked) or poll.retention_seconds > 0 (published rows expire):
-- GRANT DELETE ON TABLE public.outbox TO :"role";

-- Role, privileges and publication for walrelay.
--
-- Run with psql as a superuser (or as a role with CREATEROLE that owns the
-- outbox table), connected to the database that holds the outbox:
--   psql -d app -f deploy/postgresql/walrelay-role.sql
-- Replace `app`, `public` and `public.outbox` with your database, schema and
-- table, and keep them in sync with walrelay.toml ([postgres] dbname,
-- [outbox] table, [replication] publication).

-- REPLICATION lets the role open replication connections and create and use
-- replication slots; it grants no access to table data. No password here,
-- so it stays out of the server log and shell history: set it afterwards
-- with psql's \password walrelay (or ALTER ROLE ... PASSWORD from a secret
-- manager). Use scram-sha-256 in pg_hba.conf, e.g.
--   hostssl  app  walrelay  10.0.0.0/8  scram-sha-256
-- A logical replication connection names its database, so the hba line
-- names the database (not the `replication` keyword, which is for physical
-- replication).
CREATE ROLE walrelay WITH LOGIN REPLICATION;

GRANT CONNECT ON DATABASE app TO walrelay;
GRANT USAGE ON SCHEMA public TO walrelay;
-- walrelay reads the outbox's catalog entry and columns on its SQL
-- connection; it never writes to the table.
GRANT SELECT ON TABLE public.outbox TO walrelay;

-- The publication. walrelay creates it (FOR TABLE <outbox>) when it is
-- missing, but CREATE PUBLICATION ... FOR TABLE requires owning the table,
-- and giving a relay ownership of an application table is more than it
-- needs. Create it here as the owner instead; walrelay then only checks
-- that it publishes the table's inserts (set
-- `create_publication = false` in [replication] to make a missing
-- publication an error rather than an attempt to create it).
-- Updates are published so that walrelay can apply op_invalid_behavior to
-- UPDATEs of outbox rows, as Debezium does. Deletes are not: walrelay
-- drops every outbox delete, and the walsender would encode and send each
-- deleted row for nothing (this is what walrelay itself creates; add
-- delete with outbox.transaction_metadata = true, whose END records count
-- deletes as Debezium's do).
-- Whoever owns the publication (the table owner) is the one who can
-- ALTER or DROP it later; the walrelay role does not need to.
CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox
    WITH (publish = 'insert, update');

-- The slot: walrelay creates it (pgoutput) at its first start, which the
-- REPLICATION attribute allows. To create it beforehand instead, e.g. so
-- that WAL is retained from a known point before walrelay is deployed:
--   SELECT pg_create_logical_replication_slot('walrelay', 'pgoutput');
-- A slot retains WAL from the moment it exists, whether or not walrelay
-- runs: drop slots you no longer use (pg_drop_replication_slot('walrelay')).

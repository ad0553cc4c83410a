"""The bench database: the Debezium outbox table, its publications, the
payload function and the load procedures of W1-W5 and the writer's cost,
and outbox_emit() installed as it is shipped (deploy/postgresql). SQL
only; env.py runs it once per run into a fresh database `bench`."""

import os

from . import REPO

# W5's systems read this publication of no table, with messages on.
MESSAGES_PUBLICATION = "bench_messages"
MESSAGE_PREFIX = "outbox"
# The users' helper, installed into the bench database as it is shipped.
EMIT_SQL = os.path.join(REPO, "deploy", "postgresql", "outbox_emit.sql")

SCHEMA_SQL = r"""
CREATE TABLE outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
);
CREATE PUBLICATION bench FOR TABLE outbox;
-- The same table without deletes (and truncates): the walsender sends no
-- message for the outbox DELETE of W1/W3/W5-style transactions. For
-- variants: walrelay:replication.publication=bench_iu, walsender:publication=bench_iu.
CREATE PUBLICATION bench_iu FOR TABLE outbox WITH (publish = 'insert, update');
-- About 300 bytes of JSON text, as jsonb_out writes it.
CREATE FUNCTION bench_payload(i bigint, x bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('orderId', i, 'customer', 'customer-' || (i % 1000), 'currency', 'EUR',
    'total', i % 100000, 'xid', x, 'note', repeat('x', @NOTE@))
$$;
-- W1: single-event transactions, each inserting and deleting its outbox row.
CREATE PROCEDURE load_single(n int) LANGUAGE plpgsql AS $$
DECLARE i int; u uuid;
BEGIN
  FOR i IN 1..n LOOP
    u := gen_random_uuid();
    INSERT INTO outbox VALUES (u, 'Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
    DELETE FROM outbox WHERE id = u;
    COMMIT;
  END LOOP;
END $$;
-- W2: insert-only transactions of per_txn rows.
CREATE PROCEDURE load_batched(n int, per_txn int) LANGUAGE plpgsql AS $$
DECLARE i int := 0;
BEGIN
  WHILE i < n LOOP
    INSERT INTO outbox SELECT gen_random_uuid(), 'Order', 'order-' || (g % 1000), 'OrderCreated',
      bench_payload(g, 0) FROM generate_series(i + 1, least(i + per_txn, n)) g;
    COMMIT;
    i := i + per_txn;
  END LOOP;
END $$;
-- W3: one event per call; the event id carries the transaction id, so a
-- consumer can look up the commit timestamp.
CREATE FUNCTION bench_emit() RETURNS void LANGUAGE plpgsql AS $$
DECLARE x bigint := txid_current(); u uuid;
BEGIN
  u := ('00000000-0000-4000-8000-' || lpad(to_hex(x), 12, '0'))::uuid;
  INSERT INTO outbox VALUES (u, 'Order', 'order-' || (x % 1000), 'OrderCreated', bench_payload(x, x));
  DELETE FROM outbox WHERE id = u;
END $$;
-- W5 publishes no table: only logical decoding messages reach its slots.
CREATE PUBLICATION bench_messages;
-- The writer's cost, table style: W1's transaction for one pgbench call.
CREATE FUNCTION bench_write_table(i bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE u uuid := gen_random_uuid();
BEGIN
  INSERT INTO outbox VALUES (u, 'Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
  DELETE FROM outbox WHERE id = u;
END $$;
"""

# After outbox_emit.sql is installed (it is the users' helper, not a copy).
LOAD_MESSAGES_SQL = r"""
-- W5: W1's events, each one transactional logical decoding message whose
-- content is the event as a JSON object (id, aggregatetype, aggregateid,
-- type, payload).
CREATE PROCEDURE load_messages(n int) LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1..n LOOP
    PERFORM outbox_emit('Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
    COMMIT;
  END LOOP;
END $$;
-- The writer's cost, message style: W5's transaction for one pgbench call.
CREATE FUNCTION bench_write_message(i bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM outbox_emit('Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
END $$;
"""

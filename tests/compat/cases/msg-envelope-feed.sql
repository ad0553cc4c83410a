-- The writes of msg-envelope-*: no decode transform, so every included
-- message becomes Debezium's <topic.prefix>.message record, whatever its
-- content. The selects of pg_current_wal_lsn() and txid_current() only
-- document the LSNs (observe.sh keeps psql's output).
-- 0: a committed transaction first (its prefix is not included): every later
--    record's source.sequence starts with a commit both relays decoded.
select pg_logical_emit_message(true, 'skip_@AGG@', 'x');
select pg_current_wal_lsn();
-- 1: one transactional message (its own transaction).
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"1"}');
select pg_current_wal_lsn();
-- 2: a transaction: two transactional messages around a non-transactional
--    one, committed.
begin;
select txid_current();
select pg_logical_emit_message(true, 'outbox_@AGG@', 'tx-a');
select pg_logical_emit_message(false, 'outbox_@AGG@', 'nontx-in-committed');
select pg_logical_emit_message(true, 'outbox_@AGG@', 'tx-b');
commit;
select pg_current_wal_lsn();
-- 3: the same, rolled back.
begin;
select txid_current();
select pg_logical_emit_message(true, 'outbox_@AGG@', 'tx-rolled-back');
select pg_logical_emit_message(false, 'outbox_@AGG@', 'nontx-in-rolled-back');
rollback;
select pg_current_wal_lsn();
-- 4: a savepoint rolled back.
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', 'sp-before');
savepoint s1;
select pg_logical_emit_message(true, 'outbox_@AGG@', 'sp-lost');
rollback to savepoint s1;
select pg_logical_emit_message(true, 'outbox_@AGG@', 'sp-after');
commit;
-- 5: a non-transactional message outside any transaction, then empty and
--    binary (not UTF-8) content.
select pg_logical_emit_message(false, 'outbox_@AGG@', 'nontx-alone');
select pg_logical_emit_message(true, 'outbox_@AGG@', '');
select pg_logical_emit_message(true, 'outbox_@AGG@', '\xff00fe'::bytea);
select pg_logical_emit_message(true, 'outbox_@AGG@', 'Zoë 😀');
select pg_current_wal_lsn();

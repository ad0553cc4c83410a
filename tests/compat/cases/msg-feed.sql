-- The writes of the msg-* decode cases: logical decoding messages with the
-- prefix outbox_@AGG@ (the only one the connector includes), routed to
-- outbox.event.M_@AGG@ / N_@AGG@. Run by psql, one statement at a time.
-- 0: a committed transaction first, so the previous commit every later
--    event follows is one both relays decoded (its prefix is not included).
select pg_logical_emit_message(true, 'skip_@AGG@', 'not json, filtered out');
-- 1: Debezium's example as a message, the content written by hand.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"59a42efd-b015-44a9-9dde-cb36d9002425","aggregatetype":"M_@AGG@","aggregateid":"10711fa5","type":"UserCreated","payload":{"email":"gh@mefi.in"}}');
-- 2: outbox_emit's form (jsonb_build_object(...)::text: jsonb key order and
--    separators), a payload with a duplicate key, non-ASCII and escapes.
select pg_logical_emit_message(true, 'outbox_@AGG@', jsonb_build_object('id', '0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01', 'aggregatetype', 'M_@AGG@', 'aggregateid', 'k2', 'type', 'UserUpdated',
  'payload', E'{"zeta": 1, "a": [1, 2, 3], "name": "Zo\u00eb \\"q\\" \\\\ tab\\t", "nested": {"b": {}, "aa": []}, "a": "dup"}'::jsonb)::text);
-- 3: one transaction, payloads of every JSON type but null.
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m3","aggregatetype":"M_@AGG@","aggregateid":"k3","type":"T","payload":"{\"s\": 1}"}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m4","aggregatetype":"M_@AGG@","aggregateid":"k4","type":"T","payload":42}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m5","aggregatetype":"N_@AGG@","aggregateid":"k5","type":"T","payload":true}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m6","aggregatetype":"M_@AGG@","aggregateid":"k6","type":"T","payload":[1,2]}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m7","aggregatetype":"M_@AGG@","aggregateid":"k7","type":"T","payload":""}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m8","aggregatetype":"M_@AGG@","aggregateid":"k8","type":"T","payload":{}}');
commit;
-- 4: numbers (int, long, doubles), a null member, empty and nested arrays,
--    arrays of objects of one shape.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m9","aggregatetype":"M_@AGG@","aggregateid":"k9","type":"T","payload":{"i":7,"neg":-2147483648,"l":3000000000,"d":1.5,"e":1e3,"z":-0.0,"big":12345678901234567,"tiny":1.0E-7,"huge":1.5e300,"nul":null,"ea":[],"na":[[1,2],[3]],"objs":[{"a":1,"b":"x"},{"a":2,"b":"y"}],"t":true,"f":false}}');
-- 5: strings: emoji, control characters, slash, unicode escapes.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m10","aggregatetype":"M_@AGG@","aggregateid":"k10","type":"T","payload":{"emoji":"😀","ctl":"\u0001\n","slash":"a\/b","esc":"\u00e9\""}}');
-- 6: key and id of other types, extra members, members in another order,
--    no type member (nothing reads it), a duplicate top-level member.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"payload":{"n":1},"aggregateid":7,"extra":{"x":[true]},"id":11,"aggregatetype":"M_@AGG@"}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m12","aggregatetype":"M_@AGG@","aggregateid":"first","aggregateid":"second","type":"T","payload":{"v":1}}');
-- 7: rolled back: nothing.
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"rolled-back","aggregatetype":"M_@AGG@","aggregateid":"rb","type":"T","payload":{}}');
rollback;
-- 8: a savepoint rolled back: only its message is lost.
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m14","aggregatetype":"M_@AGG@","aggregateid":"sp","type":"T","payload":{"kept":1}}');
savepoint s1;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"lost","aggregatetype":"M_@AGG@","aggregateid":"sp","type":"T","payload":{"kept":0}}');
rollback to savepoint s1;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"m15","aggregatetype":"M_@AGG@","aggregateid":"sp","type":"T","payload":{"kept":2}}');
commit;
-- 9: a non-transactional message in a transaction that rolls back: delivered,
--    before the transaction's own (lost) message.
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"lost2","aggregatetype":"M_@AGG@","aggregateid":"nt","type":"T","payload":{}}');
select pg_logical_emit_message(false, 'outbox_@AGG@', '{"id":"m16","aggregatetype":"M_@AGG@","aggregateid":"nt","type":"T","payload":{"nt":1}}');
rollback;

-- The writes of msg-nulls* (fields.null.include=true): JSON nulls become
-- optional bytes fields. A null key lands on any partition: route N_ has one.
select pg_logical_emit_message(true, 'skip_@AGG@', 'not json, filtered out');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"u1","aggregatetype":"M_@AGG@","aggregateid":"k1","type":"T","payload":{"a":null,"b":1,"c":{"d":null},"arr":[null,2]}}');
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"u2","aggregatetype":"M_@AGG@","aggregateid":"k2","type":null,"payload":null}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":null,"aggregatetype":"M_@AGG@","aggregateid":"k3","type":"T","payload":{"v":3}}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"u4","aggregatetype":"N_@AGG@","aggregateid":null,"type":"T","payload":{"v":4}}');
commit;

-- The writes of msg-tombstone (route.tombstone.on.empty.payload=true,
-- fields.null.include=true): empty, blank and null payloads.
select pg_logical_emit_message(true, 'skip_@AGG@', 'not json, filtered out');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t1","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Created","payload":{"v":1}}');
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t2","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Deleted","payload":""}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t3","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Deleted","payload":"  "}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t4","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Deleted","payload":null}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t5","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Created","payload":{}}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"t6","aggregatetype":"T_@AGG@","aggregateid":"k1","type":"Created","payload":"x"}');
commit;

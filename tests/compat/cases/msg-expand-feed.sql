-- The writes of msg-expand-*: payloads as JSON string members, expanded by
-- table.expand.json.payload (and a struct payload, which is not). No
-- top-level array: with schemas on, Debezium's task fails on one
-- (docs: debezium-compat.md section 6).
select pg_logical_emit_message(true, 'skip_@AGG@', 'not json, filtered out');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"e1","aggregatetype":"E_@AGG@","aggregateid":"k1","type":"T","payload":"{\"email\": \"gh@mefi.in\", \"n\": 1, \"l\": 3000000000, \"d\": 2.5, \"nested\": {\"b\": [1, 2]}, \"nul\": null, \"ea\": []}"}');
begin;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"e3","aggregatetype":"E_@AGG@","aggregateid":"k3","type":"T","payload":"not json"}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"e4","aggregatetype":"E_@AGG@","aggregateid":"k4","type":"T","payload":"{broken"}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"e5","aggregatetype":"E_@AGG@","aggregateid":"k5","type":"T","payload":{"already":"struct"}}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"e6","aggregatetype":"E_@AGG@","aggregateid":"k6","type":"T","payload":" {\"lead\": 1}"}');
commit;

-- The logical-message outbox (pg_logical_emit_message with the prefix the
-- connector includes; DecodeLogicalDecodingMessageContent, then the
-- EventRouter): members for every placement, a payload object, a payload
-- that is JSON text (expanded under table.expand.json.payload), a key and
-- id of other types, non-ASCII, one transaction of two, a rollback.
select pg_logical_emit_message(true, 'skipped', 'not json, not included');
select pg_logical_emit_message(true, 'outbox', '{"id":"59a42efd-b015-44a9-9dde-cb36d9002425","aggregatetype":"messages","aggregateid":"10711fa5","type":"UserCreated","tenant":"acme","payload":{"email":"gh@mefi.in","n":1.5}}');
begin;
select pg_logical_emit_message(true, 'outbox', '{"id":"m2","aggregatetype":"messages","aggregateid":"k2","type":"T","tenant":"acme","payload":"{\"s\": [1, 2]}"}');
select pg_logical_emit_message(true, 'outbox', '{"id":"m3","aggregatetype":"messages","aggregateid":"k3","type":"T","tenant":"acme","payload":{"text":"h\u00e9llo 😀","arr":[1,2]}}');
commit;
begin;
select pg_logical_emit_message(true, 'outbox', '{"id":"rolled-back","aggregatetype":"messages","aggregateid":"rb","type":"T","tenant":"acme","payload":{}}');
rollback;

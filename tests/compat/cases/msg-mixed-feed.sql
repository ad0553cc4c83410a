-- The writes of msg-mixed: outbox table rows and messages in one connector
-- (tombstones.on.delete=false: the decode transform fails on a tombstone).
select pg_logical_emit_message(true, 'skip_@AGG@', 'x');
begin;
insert into @TABLE@ values ('59a42efd-b015-44a9-9dde-cb36d9002425', 'U_@AGG@', '10711fa5', 'UserCreated', '{"email":"gh@mefi.in"}');
delete from @TABLE@ where id = '59a42efd-b015-44a9-9dde-cb36d9002425';
select pg_logical_emit_message(true, 'outbox_@AGG@', jsonb_build_object('id', '0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01', 'aggregatetype', 'U_@AGG@', 'aggregateid', '10711fa5', 'type', 'UserUpdated', 'payload', '{"email":"gh@mefi.in"}'::jsonb)::text);
commit;
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10","aggregatetype":"U_@AGG@","aggregateid":"k3","type":"T","payload":"{\"email\": \"gh@mefi.in\"}"}');
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000004', 'U_@AGG@', 'k4', 'OrderPlaced', '{"n": 4}');

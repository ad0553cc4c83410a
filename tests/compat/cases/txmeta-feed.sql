-- The writes of the txmeta-* row cases (provide.transaction.metadata=true):
-- every transaction pgoutput sends gets Debezium's BEGIN and END records,
-- whether or not its events survive the EventRouter. Run by psql, one
-- statement at a time, so each statement outside begin/commit is its own
-- transaction.
-- 1: the outbox way: insert and delete in one transaction (2 events).
begin;
insert into @TABLE@ values ('59a42efd-b015-44a9-9dde-cb36d9002425', 'U_@AGG@', '10711fa5', 'UserCreated', '{"email":"gh@mefi.in"}');
delete from @TABLE@ where id = '59a42efd-b015-44a9-9dde-cb36d9002425';
commit;
-- 2: an autocommit insert, 3: its delete on its own (the only event of
--    that transaction is one the EventRouter drops).
insert into @TABLE@ values ('0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01', 'U_@AGG@', 'k2', 'UserUpdated', '{"n": 2}');
delete from @TABLE@ where id = '0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01';
-- 4: several inserts (two aggregate types) and deletes in one transaction.
begin;
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000004', 'V_@AGG@', 'k4', 'OrderPlaced', '{"n": 4}');
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000005', 'U_@AGG@', 'k5', 'UserCreated', null);
delete from @TABLE@ where id = '1e0c3a9b-8a4f-4d7e-b0a1-000000000004';
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000006', 'U_@AGG@', 'k6', 'UserCreated', '{"n": 6}');
delete from @TABLE@ where id = '1e0c3a9b-8a4f-4d7e-b0a1-000000000005';
delete from @TABLE@ where id = '1e0c3a9b-8a4f-4d7e-b0a1-000000000006';
commit;
-- 5: rolled back: pgoutput sends nothing of it.
begin;
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000007', 'U_@AGG@', 'k7', 'UserCreated', '{}');
rollback;
-- 6: an update of an outbox row (the EventRouter drops it with a warning),
--    in the transaction of an insert.
begin;
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000008', 'V_@AGG@', 'k8', 'OrderPlaced', '{"n": 8}');
update @TABLE@ set type = 'OrderChanged' where id = '1e0c3a9b-8a4f-4d7e-b0a1-000000000008';
commit;

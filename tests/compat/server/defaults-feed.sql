-- The outbox way: insert and delete in one transaction (the delete and its
-- tombstone never reach a sink); then two aggregates in one transaction,
-- payloads of other JSON types.
begin;
insert into @TABLE@ values ('59a42efd-b015-44a9-9dde-cb36d9002425', 'defaults', 'order-1', 'OrderCreated',
  '{"total": 12.5, "items": ["a", "b"], "zeta": 1, "a": {"nested": [1, 2.50, true, null]}}');
delete from @TABLE@ where id = '59a42efd-b015-44a9-9dde-cb36d9002425';
commit;
begin;
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000002', 'defaults', 'order-2', 'OrderPaid', '[1, {"b": 2, "a": 1}]');
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000003', 'defaults', 'order-1', 'OrderShipped', '"shipped"');
commit;

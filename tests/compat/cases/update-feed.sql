-- UPDATEs of outbox rows, alone and amid inserts of one transaction.
insert into @TABLE@ values ('c3000000-0000-4000-8000-000000000001', 'U_@AGG@', 'a', 'Created', '{"v": 1}');
update @TABLE@ set payload = '{"v": 2}' where id = 'c3000000-0000-4000-8000-000000000001';
begin;
insert into @TABLE@ values ('c3000000-0000-4000-8000-000000000002', 'U_@AGG@', 'b', 'Created', '{"v": 1}');
update @TABLE@ set type = 'Changed' where id = 'c3000000-0000-4000-8000-000000000002';
insert into @TABLE@ values ('c3000000-0000-4000-8000-000000000003', 'U_@AGG@', 'c', 'Created', '{"v": 1}');
commit;
insert into @TABLE@ values ('c3000000-0000-4000-8000-000000000004', 'U_@AGG@', 'd', 'Created', '{"v": 1}');
delete from @TABLE@ where id = 'c3000000-0000-4000-8000-000000000001';

-- An insert both relays deliver, then a transaction whose UPDATE is fatal.
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000001', 'U_@AGG@', 'a', 'Created', '{"row": "a"}');
select pg_sleep(1);
begin;
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000002', 'U_@AGG@', 'b', 'Created', '{"row": "b"}');
update @TABLE@ set type = 'Changed' where id = 'c4000000-0000-4000-8000-000000000002';
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000003', 'U_@AGG@', 'c', 'Created', '{"row": "c"}');
commit;
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000004', 'U_@AGG@', 'd', 'Created', '{"row": "d"}');

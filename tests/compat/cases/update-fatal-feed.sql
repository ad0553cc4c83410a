-- An insert both relays deliver, then an UPDATE alone in its transaction:
-- both stop, nothing after it is delivered.
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000001', 'U_@AGG@', 'a', 'Created', '{"row": "a"}');
select pg_sleep(1);
update @TABLE@ set type = 'Changed' where id = 'c4000000-0000-4000-8000-000000000001';
insert into @TABLE@ values ('c4000000-0000-4000-8000-000000000004', 'U_@AGG@', 'd', 'Created', '{"row": "d"}');

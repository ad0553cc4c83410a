-- 50 inserts, then an UPDATE in the same transaction. Debezium transforms
-- and sends record by record, so it delivers all 50 before its task fails.
insert into @TABLE@ values ('c5000000-0000-4000-8000-000000000001', 'U_@AGG@', 'a', 'Created', '{"row": "a"}');
select pg_sleep(1);
begin;
insert into @TABLE@
  select ('c5000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid, 'U_@AGG@', 'b' || n, 'Created',
         jsonb_build_object('row', n)
  from generate_series(2, 51) n;
update @TABLE@ set type = 'Changed' where id = 'c5000000-0000-4000-8000-000000000002';
insert into @TABLE@ values ('c5000000-0000-4000-8000-000000000099', 'U_@AGG@', 'c', 'Created', '{"row": "c"}');
commit;

-- An array mixing types cannot be given a schema: Debezium's task fails on it.
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000001', 'E_@AGG@', 'k1', 'Fine', '{"a": [1, 2]}');
select pg_sleep(1);
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000002', 'E_@AGG@', 'k2', 'Mixed', '{"a": [1, "x"]}');
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000003', 'E_@AGG@', 'k3', 'After', '{"a": [3]}');

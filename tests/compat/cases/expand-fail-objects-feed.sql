-- A top-level array of objects: the element schema merges, the value is
-- not a struct, the task fails.
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000011', 'E_@AGG@', 'k1', 'Fine', '{"a": 1}');
select pg_sleep(1);
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000012', 'E_@AGG@', 'k2', 'Objects', '[{"a": 1}, {"a": 2, "b": "x"}]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000013', 'E_@AGG@', 'k3', 'After', '{"a": 3}');

-- A text payload Debezium expands, then a top-level JSON array: its schema
-- is inferred (ARRAY) but the value cannot become a struct, so Debezium
-- sends the text under the ARRAY schema and the converter fails the task.
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000001', 'E_@AGG@', 'k1', 'Fine', '{"a": 1}');
select pg_sleep(1);
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000002', 'E_@AGG@', 'k2', 'Array', '[1, 2, 3]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000003', 'E_@AGG@', 'k3', 'After', '{"a": 3}');

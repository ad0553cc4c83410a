-- An object whose schema is inferred from the first element of a nested
-- array ([1] gives ARRAY<INT32>) while a later element holds strings: the
-- struct's value check fails after the schema was replaced, so the text
-- goes out under the STRUCT schema and the converter fails the task.
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000021', 'E_@AGG@', 'k1', 'Fine', '{"a": [[1], [2]]}');
select pg_sleep(1);
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000022', 'E_@AGG@', 'k2', 'Nested', '{"a": [[1], ["x"]]}');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000023', 'E_@AGG@', 'k3', 'After', '{"a": 3}');

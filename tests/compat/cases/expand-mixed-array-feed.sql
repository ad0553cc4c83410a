-- An array mixing types has no schema: Debezium logs "JSON expansion
-- failed" and sends the payload unexpanded (a string).
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000001', 'E_@AGG@', 'k1', 'Fine', '{"a": [1, 2]}');
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000002', 'E_@AGG@', 'k2', 'Mixed', '{"a": [1, "x"]}');
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000003', 'E_@AGG@', 'k3', 'Numbers', '{"a": [1, 2.5]}');
insert into @TABLE@ values ('7d000000-0000-4000-8000-000000000004', 'E_@AGG@', 'k4', 'After', '{"a": [3]}');

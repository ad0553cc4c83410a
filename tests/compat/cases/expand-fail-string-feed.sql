-- StringConverter prints whatever value it is given, so even the payloads
-- whose expansion fails after the schema was inferred go out as their text.
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000041', 'E_@AGG@', 'k1', 'Scalars', '[1, 2, 3]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000042', 'E_@AGG@', 'k2', 'Objects', '[{"a": 1}, {"a": 2}]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000043', 'E_@AGG@', 'k3', 'Empty', '[]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000044', 'E_@AGG@', 'k4', 'Nested', '{"a": [[1], ["x"]]}');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000045', 'E_@AGG@', 'k5', 'Number', '42');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000046', 'E_@AGG@', 'k6', 'Fine', '{"a": [1, 2]}');

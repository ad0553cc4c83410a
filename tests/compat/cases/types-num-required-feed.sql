-- The NaN first: Debezium's task fails on it (its change event's `after`
-- struct refuses null in the required field) before anything is sent.
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000001', 'Y_@AGG@', 'k1', 'A', '{}', 'NaN');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000002', 'Y_@AGG@', 'k2', 'B', '{}', 1.5);

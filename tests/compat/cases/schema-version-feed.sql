-- Debezium caches the envelope schema per version: the first route value
-- seen with a version names it.
insert into @TABLE@ values ('b2000000-0000-4000-8000-000000000001', 'U_@AGG@', 'k1', 'A', '{"v": 1}', 1);
insert into @TABLE@ values ('b2000000-0000-4000-8000-000000000002', 'U_@AGG@', 'k2', 'B', '{"v": 3}', 3);
insert into @TABLE@ values ('b2000000-0000-4000-8000-000000000003', 'V_@AGG@', 'k3', 'C', '{"v": 1}', 1);
insert into @TABLE@ values ('b2000000-0000-4000-8000-000000000004', 'V_@AGG@', 'k4', 'D', '{"v": 2}', 2);

insert into @TABLE@ values ('9f000000-0000-4000-8000-000000000001', 'Q_@AGG@', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'A', '{"x": 1}');
insert into @TABLE@ values ('9f000000-0000-4000-8000-000000000002', 'Q_@AGG@', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12', 'B', '{"x": 2}');
-- A NULL key: the producer picks any partition, so its topic has one.
insert into @TABLE@ values ('9f000000-0000-4000-8000-000000000003', 'N_@AGG@', null, 'C', '{"x": 3}');

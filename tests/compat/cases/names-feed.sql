insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000001', 'N_@AGG@', 'k1', 'Created', '{"a": 1}', 't1');
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000002', 'N_@AGG@', 'k2', 'Changed', '{"a-b": [1, 2]}', null);
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000003', 'N_@AGG@', 'k1', 'Removed', null, 't3');

insert into @TABLE@ values ('8e000000-0000-4000-8000-000000000001', 'T_@AGG@', 'k1', 'Null', null);
insert into @TABLE@ values ('8e000000-0000-4000-8000-000000000002', 'T_@AGG@', 'k2', 'EmptyObject', '{}');
insert into @TABLE@ values ('8e000000-0000-4000-8000-000000000003', 'T_@AGG@', 'k3', 'EmptyString', '""');
insert into @TABLE@ values ('8e000000-0000-4000-8000-000000000004', 'T_@AGG@', 'k4', 'Object', '{"a": 1}');

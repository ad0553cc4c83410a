insert into @TABLE@ values ('8d000000-0000-4000-8000-000000000001', 'T_@AGG@', 'k1', 'Empty', '');
insert into @TABLE@ values ('8d000000-0000-4000-8000-000000000002', 'T_@AGG@', 'k2', 'Blank', E'  \t ');
insert into @TABLE@ values ('8d000000-0000-4000-8000-000000000003', 'T_@AGG@', 'k3', 'Null', null);
insert into @TABLE@ values ('8d000000-0000-4000-8000-000000000004', 'T_@AGG@', 'k4', 'Text', 'x');
insert into @TABLE@ values ('8d000000-0000-4000-8000-000000000005', 'T_@AGG@', 'k5', 'Padded', ' x ');

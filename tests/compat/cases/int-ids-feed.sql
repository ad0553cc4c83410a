insert into @TABLE@ values (1, 'I_@AGG@', 42, 'A', '{"x": 1}');
insert into @TABLE@ values (-2, 'I_@AGG@', -9000000000, 'B', '{"x": 2}');
insert into @TABLE@ values (2147483647, 'I_@AGG@', 0, 'C', null);

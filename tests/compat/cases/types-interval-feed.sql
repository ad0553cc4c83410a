insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000001', 'Y_@AGG@', 'k1', 'A', '{}', '1 year 2 mons -3 days +04:05:06.789', '00:00:00', '1.2345 seconds');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000002', 'Y_@AGG@', 'k2', 'B', '{}', '-1 year -2 mons', '-00:00:01.5', '-1 day +01:00:00');
begin;
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000003', 'Y_@AGG@', 'k3', 'C', '{}', '1 mon', '100 years', null);
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000004', 'Y_@AGG@', 'k4', 'D', '{}', '-3 days -04:00:00', '1 day 00:00:00.000001', '2 hours 3 minutes');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000005', 'Y_@AGG@', 'k5', 'E', '{}', null, '-17800 years', '0.5 seconds');
commit;
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000006', 'Y_@AGG@', 'k6', 'F', '{}', '11 mons 30 days 23:59:59.999999', '1 year -1 day', '-00:00:00.001');

insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000001', 'P_@AGG@', '10711fa5', 'UserCreated', '{"email": "gh@mefi.in"}', 0, 'acme', true);
begin;
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000002', 'P_@AGG@', 'k2', 'UserUpdated', null, 4, null, false);
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000003', 'P_@AGG@', 'k3', 'Ünïcode', '{"b": [1, 2]}', 5, 'Zoë 😀', true);
commit;

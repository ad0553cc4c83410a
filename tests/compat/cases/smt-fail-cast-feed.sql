-- The second event's qty cannot be cast to int32 (tests/compat/cases/smt-fail-cast).
insert into @TABLE@ values ('5f000000-0000-4000-8000-000000000001', 'U_@AGG@', 'k1', 'OrderPlaced', '{"id": 1, "qty": "3"}');
insert into @TABLE@ values ('5f000000-0000-4000-8000-000000000002', 'U_@AGG@', 'k2', 'OrderPlaced', '{"id": 2, "qty": "many"}');
insert into @TABLE@ values ('5f000000-0000-4000-8000-000000000003', 'U_@AGG@', 'k3', 'OrderPlaced', '{"id": 3, "qty": "4"}');

-- Object payloads of one shape, for chains that reshape the expanded
-- payload (tests/compat/cases/smt-expand-*): nested structs to flatten,
-- numbers to cast, a name to mask, a date to convert, an array to drop.
insert into @TABLE@ values ('5e000000-0000-4000-8000-000000000001', 'U_@AGG@', 'k1', 'OrderPlaced',
  '{"id": 1, "customer": {"name": "Ann", "address": {"city": "Oslo", "zip": "0150"}}, "total": 12.5, "qty": 3, "when": "2024-03-01", "tags": ["a", "b"]}');
begin;
insert into @TABLE@ values ('5e000000-0000-4000-8000-000000000002', 'U_@AGG@', 'k2', 'OrderPlaced',
  '{"id": 22, "customer": {"name": "Bo", "address": {"city": "Zo\u00eb", "zip": "9999"}}, "total": 0.1, "qty": 70000, "when": "1999-12-31", "tags": []}');
insert into @TABLE@ values ('5e000000-0000-4000-8000-000000000003', 'V_@AGG@', 'k3', 'OrderPlaced',
  '{"id": 12345678901, "customer": {"name": "", "address": {"city": "", "zip": "0"}}, "total": -3, "qty": -1, "when": "2030-01-31", "tags": ["x"]}');
commit;

-- Header and envelope placements of type and tenant: set, NULL, and a value
-- with spaces and JSON-escaped characters (ASCII only: jnats refuses a
-- header value beyond ASCII, see the fatal step).
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000001', 'placements', 'k1', 'OrderCreated', '{"email": "gh@mefi.in"}', 'acme');
begin;
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000002', 'placements', 'k2', 'OrderUpdated', null, null);
insert into @TABLE@ values ('5a000000-0000-4000-8000-000000000003', 'placements', null, 'Order "quoted"', '{"b": [1, 2]}', E'a\\b c/d\ttab');
commit;

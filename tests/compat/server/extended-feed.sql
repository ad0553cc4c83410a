-- Redis extended with simplestring key and value and the header converter
-- without schemas: a plain event, a NULL payload (null.value), a NULL
-- aggregateid (null.key), non-ASCII in key, value and a header, a NULL
-- header value.
insert into @TABLE@ values ('a1b2c3d4-0000-4000-8000-000000000001', 'extended', 'order-5', 'OrderCreated', '{"total": 1}', 'acme');
insert into @TABLE@ values ('a1b2c3d4-0000-4000-8000-000000000002', 'extended', 'order-6', 'OrderDeleted', null, 'acme');
begin;
insert into @TABLE@ values ('a1b2c3d4-0000-4000-8000-000000000003', 'extended', null, 'OrderNoted', '{"k": 1}', 'acme');
insert into @TABLE@ values ('a1b2c3d4-0000-4000-8000-000000000004', 'extended', 'Zoë-😀', 'Ünïcode', E'{"note": "h\u00e9llo \U0001F600"}', 'Zoë 😀');
insert into @TABLE@ values ('a1b2c3d4-0000-4000-8000-000000000005', 'extended', 'order-7', 'OrderNoted', '{}', null);
commit;

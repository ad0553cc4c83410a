-- A NULL payload (a JSON envelope with "payload":null at the json format, a
-- null value under simplestring), a NULL aggregateid (the key), both and a
-- NULL type.
insert into @TABLE@ values ('6d1f5b0e-2c8a-4d7e-9f31-0a2b3c4d5e6f', 'nulls', 'order-2', 'OrderDeleted', null);
insert into @TABLE@ values ('9d2a8c74-0000-4000-8000-000000000003', 'nulls', null, 'OrderNoted', '{"k": 1}');
insert into @TABLE@ values ('9d2a8c74-0000-4000-8000-000000000004', 'nulls', null, null, null);

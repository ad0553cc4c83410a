-- table.expand.json.payload: nested objects and arrays (struct elements
-- whose fields are prefixes of each other's: see tests/compat/cases/expand-feed.sql
-- for why not others), a scalar, NULL, {}.
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000001', 'expand', 'k1', 'Nested',
  '{"order": {"id": 7, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2, "price": 2.5}], "tags": ["x", "y"], "empty": [], "matrix": [[1, 2], [3]]}, "big": 12345678901, "n": null, "f": 1.0, "t": true, "e": {}, "text": "héllo 😀"}', 'acme');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000002', 'expand', 'k2', 'Scalar', '"just a string"', 'acme');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000003', 'expand', 'k3', 'Null', null, 'acme');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000004', 'expand', 'k4', 'Empty', '{}', 'acme');

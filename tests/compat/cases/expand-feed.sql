-- Nested objects and arrays (struct elements where one lacks a field, nested
-- arrays, a leading null, an empty array and object), a scalar, NULL, {}.
-- Struct elements whose field lists are not each other's prefixes (in jsonb
-- key order) would make Debezium's merged schema order random: it merges
-- the element schemas from a HashSet of SchemaBuilders (identity hashes),
-- see the report in tests/integration/compatibility.rs (expand merge order).
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000001', 'E_@AGG@', 'k1', 'Nested',
  '{"order": {"id": 7, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2, "price": 2.5}], "tags": ["x", "y"], "empty": [], "matrix": [[1, 2], [3]], "sparse": [null, 2, 3]}, "big": 12345678901, "n": null, "f": 1.0, "neg": -3, "t": true, "e": {}}');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000002', 'E_@AGG@', 'k2', 'Scalar', '"just a string"');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000003', 'E_@AGG@', 'k3', 'Null', null);
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000004', 'E_@AGG@', 'k4', 'Empty', '{}');
insert into @TABLE@ values ('7c000000-0000-4000-8000-000000000005', 'E_@AGG@', 'k5', 'Deep',
  E'{"deep": {"a": {"b": {"c": [true, false]}}}, "text": "\u00fc\u20ac\U0001F600 \\u0001 \\/ <>&"}');

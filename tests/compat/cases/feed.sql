-- The writes of most cases (tests/compat/observed.md): run by psql, one
-- statement at a time, so each statement outside begin/commit is its own
-- transaction.
-- 1: the outbox way: insert and delete in one transaction.
begin;
insert into @TABLE@ values ('59a42efd-b015-44a9-9dde-cb36d9002425', 'U_@AGG@', '10711fa5', 'UserCreated', '{"email":"gh@mefi.in"}');
delete from @TABLE@ where id = '59a42efd-b015-44a9-9dde-cb36d9002425';
commit;
-- 2: jsonb canonicalisation, a duplicate key, non-ASCII, escapes; deleted in a later transaction.
insert into @TABLE@ values ('0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01', 'U_@AGG@', 'k2', 'UserUpdated',
  E'{"zeta": 1, "a": [1, 2.50, true, null], "name": "Zo\u00eb \\"q\\" \\\\ tab\\t", "nested": {"b": {}, "aa": []}, "a": "dup"}');
delete from @TABLE@ where id = '0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01';
-- 3: a NULL payload.
insert into @TABLE@ values ('7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10', 'U_@AGG@', '10711fa5', 'UserDeleted', null);
delete from @TABLE@ where id = '7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10';
-- 4: a second aggregate type (its own topic) and a multi-row transaction.
begin;
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000004', 'V_@AGG@', 'k4', 'OrderPlaced', '{"n": 4, "f": 1.50e2, "s": "x"}');
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000005', 'U_@AGG@', 'k5', 'UserCreated', '[1, {"b": 2, "a": 1}]');
-- A character outside the BMP, a control character, a slash.
insert into @TABLE@ values ('1e0c3a9b-8a4f-4d7e-b0a1-000000000006', 'U_@AGG@', 'k6', 'UserCreated',
  E'{"emoji": "\U0001F600", "ctl": "\\u0001", "slash": "a/b"}');
commit;

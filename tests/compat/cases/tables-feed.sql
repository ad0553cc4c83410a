-- The writes of the tables-* cases: three outbox tables written in
-- interleaved transactions, the same aggregate (key) in several tables,
-- routed to one topic. Run by psql, one statement at a time, so each
-- statement outside begin/commit is its own transaction.
-- 1: a, b, c, a in one transaction; k1 from a and b into U, deleted again.
begin;
insert into @TABLE@_a values ('7a000000-0000-4000-8000-000000000001', 'U_@AGG@', 'k1', 'A1', '{"t": "a", "n": 1}');
insert into @TABLE@_b values ('7b000000-0000-4000-8000-000000000002', 'U_@AGG@', 'k1', 'B2', '{"t": "b", "n": 2}');
delete from @TABLE@_a where id = '7a000000-0000-4000-8000-000000000001';
insert into @TABLE@_c values ('7c000000-0000-4000-8000-000000000003', 'V_@AGG@', 'k2', 'C3', '{"t": "c", "n": 3}');
insert into @TABLE@_a values ('7a000000-0000-4000-8000-000000000004', 'U_@AGG@', 'k1', 'A4', '{"t": "a", "n": 4}');
delete from @TABLE@_b where id = '7b000000-0000-4000-8000-000000000002';
commit;
-- 2, 3: one table per transaction, alternating.
insert into @TABLE@_c values ('7c000000-0000-4000-8000-000000000005', 'U_@AGG@', 'k1', 'C5', '{"t": "c", "n": 5}');
insert into @TABLE@_b values ('7b000000-0000-4000-8000-000000000006', 'V_@AGG@', 'k2', 'B6', null);
-- 4: c, b, a, b; two aggregates over all three tables.
begin;
insert into @TABLE@_c values ('7c000000-0000-4000-8000-000000000007', 'V_@AGG@', 'k2', 'C7', '{"t": "c", "n": 7}');
insert into @TABLE@_b values ('7b000000-0000-4000-8000-000000000008', 'U_@AGG@', 'k1', 'B8', '{"t": "b", "n": 8}');
insert into @TABLE@_a values ('7a000000-0000-4000-8000-000000000009', 'V_@AGG@', 'k2', 'A9', '[9]');
insert into @TABLE@_b values ('7b000000-0000-4000-8000-00000000000a', 'U_@AGG@', 'k3', 'B10', '{"t": "b", "n": 10}');
commit;
-- 5: rolled back: nothing of it is sent.
begin;
insert into @TABLE@_a values ('7a000000-0000-4000-8000-00000000000b', 'U_@AGG@', 'k1', 'A11', '{}');
insert into @TABLE@_c values ('7c000000-0000-4000-8000-00000000000c', 'U_@AGG@', 'k1', 'C12', '{}');
rollback;
-- 6: an update of a row of b (the EventRouter drops it with a warning)
--    between inserts into c and a.
begin;
insert into @TABLE@_c values ('7c000000-0000-4000-8000-00000000000d', 'U_@AGG@', 'k3', 'C13', '{"t": "c", "n": 13}');
update @TABLE@_b set type = 'B8x' where id = '7b000000-0000-4000-8000-000000000008';
insert into @TABLE@_a values ('7a000000-0000-4000-8000-00000000000e', 'U_@AGG@', 'k3', 'A14', '{"t": "a", "n": 14}');
commit;

-- tables.sql with rows already there for the initial snapshot: two per
-- table, one aggregate (key k0) on one topic, so the order in which the
-- tables are snapshotted shows in the partition.
create table public.@TABLE@_a (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb);
create table public.@TABLE@_b (like public.@TABLE@_a including all);
create table public.@TABLE@_c (like public.@TABLE@_a including all);
insert into @TABLE@_b values ('5b000000-0000-4000-8000-000000000001', 'U_@AGG@', 'k0', 'SB1', '{"s": "b1"}');
insert into @TABLE@_c values ('5c000000-0000-4000-8000-000000000002', 'U_@AGG@', 'k0', 'SC2', '{"s": "c2"}');
insert into @TABLE@_a values ('5a000000-0000-4000-8000-000000000003', 'U_@AGG@', 'k0', 'SA3', '{"s": "a3"}');
insert into @TABLE@_b values ('5b000000-0000-4000-8000-000000000004', 'U_@AGG@', 'k0', 'SB4', '{"s": "b4"}');
insert into @TABLE@_c values ('5c000000-0000-4000-8000-000000000005', 'U_@AGG@', 'k0', 'SC5', '{"s": "c5"}');
insert into @TABLE@_a values ('5a000000-0000-4000-8000-000000000006', 'U_@AGG@', 'k0', 'SA6', '{"s": "a6"}');

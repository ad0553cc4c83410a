-- Three outbox tables of the same shape (Debezium's, as outbox.sql), all in
-- one connector's table.include.list: one EventRouter routes every table's
-- change events.
create table public.@TABLE@_a (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb);
create table public.@TABLE@_b (like public.@TABLE@_a including all);
create table public.@TABLE@_c (like public.@TABLE@_a including all);

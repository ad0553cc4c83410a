-- bytea payload, key, id and extra columns under binary.handling.mode.
create table public.@TABLE@ (
  id bytea primary key,
  aggregatetype varchar(255) not null,
  aggregateid bytea,
  type varchar(255) not null,
  payload bytea,
  c_b bytea,
  c_bd bytea not null default '\x0102');

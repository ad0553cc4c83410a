-- bytea event id, key and payload.
create table public.@TABLE@ (
  id bytea primary key,
  aggregatetype varchar(255) not null,
  aggregateid bytea not null,
  type varchar(255) not null,
  payload bytea);

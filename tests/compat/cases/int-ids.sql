-- INT32 event id, INT64 key.
create table public.@TABLE@ (
  id integer primary key,
  aggregatetype varchar(255) not null,
  aggregateid bigint not null,
  type varchar(255) not null,
  payload jsonb);

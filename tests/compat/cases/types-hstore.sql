-- hstore under hstore.handling.mode.
create extension if not exists hstore;
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_h hstore,
  c_h2 hstore);

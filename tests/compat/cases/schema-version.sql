create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  version integer not null);

-- Extra columns for the placements: an INT32 partition, a nullable string
-- and a boolean.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  part integer not null,
  tenant varchar(64),
  flag boolean not null default false);

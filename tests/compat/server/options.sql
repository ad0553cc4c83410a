-- The option runs' shape: nullable key and type, and a tenant column for
-- the header and envelope placements.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype text not null,
  aggregateid text,
  type text,
  payload jsonb,
  tenant varchar(64));

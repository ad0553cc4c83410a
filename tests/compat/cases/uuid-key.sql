-- uuid key (nullable), text route column.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype text not null,
  aggregateid uuid,
  type varchar(255) not null,
  payload jsonb);

-- The shape of docs/debezium-server-sinks.md §8: aggregateid and type
-- nullable, so the key's schema is optional.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype text not null,
  aggregateid text,
  type text,
  payload jsonb);

-- Debezium's outbox shape (OutboxEventRouterIT): aggregateid NOT NULL, so
-- the key's schema is not optional.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb);

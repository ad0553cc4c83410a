-- timestamp(3) is io.debezium.time.Timestamp (ms), timestamp(6) MicroTimestamp.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  created_at timestamp(3) not null,
  at_us timestamp not null);

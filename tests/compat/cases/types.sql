-- Debezium's default type mapping (decimal.handling.mode=precise,
-- time.precision.mode=adaptive): int2 INT16, int8 INT64, numeric(p,s)
-- Decimal, numeric VariableScaleDecimal, timestamp MicroTimestamp,
-- timestamp(3) Timestamp, timestamptz ZonedTimestamp, date Date.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_int2 int2 not null,
  c_int8 int8,
  c_bool bool not null,
  c_text text,
  c_ts timestamp not null,
  c_ts3 timestamp(3),
  c_tstz timestamptz not null,
  c_date date,
  c_num numeric(10,2) not null,
  c_numv numeric,
  c_f8 float8,
  c_f4 float4 not null);

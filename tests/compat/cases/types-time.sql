-- date, time(p), timetz, timestamp(p), timestamptz under time.precision.mode.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_d date,
  c_t time,
  c_t0 time(0),
  c_t3 time(3),
  c_t4 time(4),
  c_tz timetz,
  c_ts0 timestamp(0),
  c_ts3 timestamp(3),
  c_ts timestamp,
  c_tstz timestamptz,
  c_dd date not null default '2020-02-29',
  c_td time default '12:34:56.789');

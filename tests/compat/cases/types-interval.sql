-- interval under interval.handling.mode.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_i interval,
  c_i2 interval not null default '1 day',
  c_i3 interval(3));

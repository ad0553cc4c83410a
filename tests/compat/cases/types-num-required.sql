-- A NOT NULL numeric without a default, under decimal.handling.mode=precise:
-- NaN has no form and no default stands in for it.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_nr numeric(8,2) not null);

-- numeric(p,s), numeric and money under decimal.handling.mode.
create table public.@TABLE@ (
  id uuid primary key,
  aggregatetype varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  c_n numeric(12,3),
  c_nv numeric,
  c_m money,
  c_nd numeric(8,2) not null default 1.5,
  c_md money default 2.5);

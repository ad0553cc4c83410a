-- Column names Avro does not allow: with field.name.adjustment.mode the
-- after struct's fields are event_id / _1st / the_tenant (avro) or
-- event_u002did / _u0031st / the_u002dtenant (avro_unicode), and the
-- EventRouter options name those.
create table public.@TABLE@ (
  "event-id" uuid primary key,
  "1st" varchar(255) not null,
  aggregateid varchar(255) not null,
  type varchar(255) not null,
  payload jsonb,
  "the-tenant" varchar(64));

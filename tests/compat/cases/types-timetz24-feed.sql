-- timetz and time at 24:00 (every key column set: a null key's partition
-- is the producer's own choice) (PostgreSQL takes both; Java's time types end
-- at 23:59:59.999999999), under time.precision.mode.
set time zone 'UTC';
insert into @TABLE@ (id, aggregatetype, aggregateid, type, payload, c_t, c_t4, c_tz, c_td, c_ts) values ('7e000000-0000-4000-8000-000000000001', 'Y_@AGG@', 'k1', 'A', '{}', '24:00:00', '24:00:00', '24:00:00+00', '24:00:00', '2026-01-01 00:00:01');
insert into @TABLE@ (id, aggregatetype, aggregateid, type, payload, c_t, c_t4, c_tz, c_td, c_ts) values ('7e000000-0000-4000-8000-000000000002', 'Y_@AGG@', 'k2', 'B', '{}', '23:59:59.999999', '23:59:59.9999', '24:00:00+05:30', null, '2026-01-01 00:00:02');
begin;
insert into @TABLE@ (id, aggregatetype, aggregateid, type, payload, c_t, c_t4, c_tz, c_td, c_ts) values ('7e000000-0000-4000-8000-000000000003', 'Y_@AGG@', 'k3', 'C', '{}', '00:00:00', '00:00:00', '24:00:00-08', '00:00:00', '2026-01-01 00:00:03');
insert into @TABLE@ (id, aggregatetype, aggregateid, type, payload, c_t, c_t4, c_tz, c_td, c_ts) values ('7e000000-0000-4000-8000-000000000004', 'Y_@AGG@', 'k4', 'D', '{}', '12:00:00', null, '23:59:59.999999+00', null, '2026-01-01 00:00:04');
commit;

-- A record timestamp more than an hour ahead: the broker rejects it
-- (message.timestamp.after.max.ms, default 3600000), and the relay stops.
insert into @TABLE@ values ('a2000000-0000-4000-8000-000000000001', 'S_@AGG@', 'k1', 'A', '{}', '2019-03-24 20:52:59.123', '2019-03-24 20:52:59.123456');
insert into @TABLE@ values ('a2000000-0000-4000-8000-000000000002', 'S_@AGG@', 'k2', 'B', '{}', '2001-09-09 01:46:40.999', '1999-01-01 00:00:00.000001');
-- Kafka rejects a whole producer batch: keep the earlier records out of it.
select pg_sleep(1);
insert into @TABLE@ values ('a2000000-0000-4000-8000-000000000003', 'S_@AGG@', 'k3', 'Future', '{}', '2999-12-31 23:59:59.999', '2999-12-31 23:59:59.999999');

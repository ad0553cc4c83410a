-- A NULL aggregateid (the key) with a payload, then with a NULL type too:
-- the nulls case without its NULL payloads, for a sink that refuses an empty
-- message (sns; null-payload-feed.sql has one alone).
insert into @TABLE@ values ('9d2a8c74-0000-4000-8000-000000000013', 'null-keys', null, 'OrderNoted', '{"k": 1}');
insert into @TABLE@ values ('9d2a8c74-0000-4000-8000-000000000014', 'null-keys', null, null, '{"k": 2}');

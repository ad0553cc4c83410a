-- Payloads Debezium cannot expand but sends: text that does not start
-- with { or [ (numbers, true, null, a JSON string, leading whitespace),
-- text that is not JSON, an array whose elements mix types (top level or
-- inside an object), and the empty array (no schema at all).
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000031', 'E_@AGG@', 'k1', 'Number', '42');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000032', 'E_@AGG@', 'k2', 'True', 'true');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000033', 'E_@AGG@', 'k3', 'Null', 'null');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000034', 'E_@AGG@', 'k4', 'String', '"a string"');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000035', 'E_@AGG@', 'k5', 'Space', ' {"a": 1}');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000036', 'E_@AGG@', 'k6', 'Invalid', '{"a": 1');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000037', 'E_@AGG@', 'k7', 'Bracket', '[not json');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000038', 'E_@AGG@', 'k8', 'MixedTop', '[1, "x"]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000039', 'E_@AGG@', 'k9', 'MixedIn', '{"a": [1, "x"]}');
insert into @TABLE@ values ('7e000000-0000-4000-8000-00000000003a', 'E_@AGG@', 'k10', 'Empty', '[]');
insert into @TABLE@ values ('7e000000-0000-4000-8000-00000000003b', 'E_@AGG@', 'k11', 'Fine', '{"a": [1, 2]}');

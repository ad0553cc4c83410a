-- Two values the regex matches (groups by name and number) and one it does
-- not (the raw value becomes the topic).
insert into @TABLE@ values ('6b000000-0000-4000-8000-000000000001', 'Order-@AGG@-EU', 'o1', 'OrderPlaced', '{"total": 10}');
insert into @TABLE@ values ('6b000000-0000-4000-8000-000000000002', 'Invoice-@AGG@-US', 'i1', 'InvoiceSent', '{"total": 11}');
insert into @TABLE@ values ('6b000000-0000-4000-8000-000000000003', 'nomatch.@AGG@', 'n1', 'Other', '{"total": 12}');
insert into @TABLE@ values ('6b000000-0000-4000-8000-000000000004', 'Order-@AGG@-EU', 'o2', 'OrderPlaced', '{"total": 13}');

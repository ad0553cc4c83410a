-- NULL payloads and a NULL type under a key that is set (a NULL key stops
-- Debezium Server's rabbitmqstream sink: see fatal-null-key-feed.sql).
insert into @TABLE@ values ('6d1f5b0e-2c8a-4d7e-9f31-0a2b3c4d5e70', 'keyed-nulls', 'order-2', 'OrderDeleted', null);
insert into @TABLE@ values ('6d1f5b0e-2c8a-4d7e-9f31-0a2b3c4d5e71', 'keyed-nulls', 'order-3', null, null);

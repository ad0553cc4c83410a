-- A NULL key (aggregateid) under the simplestring key format: Debezium
-- Server's rabbitmqstream sink takes message-id from the key string and
-- refuses a null one ("Unexpected data type 'null'"); the batch fails and it
-- exits.
insert into @TABLE@ values ('9d2a8c74-0000-4000-8000-0000000000fe', 'unicode', null, 'T', '{"n": 8}');

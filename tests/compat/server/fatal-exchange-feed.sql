-- An aggregate type whose exchange does not exist (RabbitMQ): Debezium
-- Server's channel is closed with 404 and it exits; walrelay refuses the
-- record as no_exchange under [errors] (tolerance none: it stops).
insert into @TABLE@ values ('ee000000-0000-4000-8000-0000000000ff', 'nowhere', 'k9', 'T', '{"n": 9}');

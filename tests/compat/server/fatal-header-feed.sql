-- A header value beyond ASCII (tenant as a header): jnats refuses it
-- (IllegalArgumentException), Debezium Server's batch fails and it exits.
insert into @TABLE@ values ('5a000000-0000-4000-8000-0000000000ff', 'placements', 'k9', 'OrderCreated', '{"n": 9}', 'Zoë');

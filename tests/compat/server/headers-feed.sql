-- Header values beyond ASCII (tenant and type as headers), which AMQP and
-- HTTP carry (jnats refuses them: nats-options has this as its fatal step),
-- and a NULL header value.
insert into @TABLE@ values ('4b000000-0000-4000-8000-000000000001', 'headers', 'k1', 'Ünïcode', '{"n": 1}', 'Zoë 😀');
insert into @TABLE@ values ('4b000000-0000-4000-8000-000000000002', 'headers', 'k2', 'OrderCreated', '{"n": 2}', null);

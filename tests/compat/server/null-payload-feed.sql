-- A NULL payload alone, last: Debezium Server's sns sink publishes an empty
-- message (moto takes it, SNS refuses one); walrelay refuses the null value
-- for itself and, under errors.tolerance=none, stops.
insert into @TABLE@ values ('6d1f5b0e-2c8a-4d7e-9f31-0a2b3c4d5e7f', 'null-payload', 'order-2', 'OrderDeleted', null);

-- The message cases need no table: the outbox is pg_logical_emit_message.
select 1;

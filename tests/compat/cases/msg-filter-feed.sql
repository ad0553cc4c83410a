-- The writes of msg-filter (message.prefix.include.list=
-- outbox_@AGG@,OTHER_@AGG@_[0-9]+): which prefixes a regex list includes.
select pg_logical_emit_message(true, 'skip_@AGG@', 'x');
select pg_logical_emit_message(true, 'outbox_@AGG@', 'exact');
select pg_logical_emit_message(true, 'OUTBOX_@AGG@', 'other case');
select pg_logical_emit_message(true, 'outbox_@AGG@_suffix', 'longer: not a whole match');
select pg_logical_emit_message(true, 'x_outbox_@AGG@', 'prefixed: not a whole match');
select pg_logical_emit_message(true, 'other_@AGG@_42', 'second pattern, other case');
select pg_logical_emit_message(true, 'other_@AGG@_x', 'second pattern, no match');
select pg_logical_emit_message(false, 'outbox_@AGG@', 'non-transactional');

-- msg-bad-empty-key: an empty member name stops the decode
-- chain; the events before it are delivered.
select pg_logical_emit_message(true, 'skip_@AGG@', 'x');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"b1","aggregatetype":"M_@AGG@","aggregateid":"k1","type":"T","payload":{"v":1}}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"b2","aggregatetype":"M_@AGG@","aggregateid":"k2","type":"T","payload":{"":1}}');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"b3","aggregatetype":"M_@AGG@","aggregateid":"k3","type":"T","payload":{"v":3}}');

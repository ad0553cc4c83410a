-- The writes of msg-placements-*: header, envelope and partition placements
-- from content members (type:header:eventType, type:envelope:eventType,
-- aggregateid:envelope:aggId, tenant:header, part:partition).
select pg_logical_emit_message(true, 'skip_@AGG@', 'not json, filtered out');
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"p1","aggregatetype":"P_@AGG@","aggregateid":"10711fa5","type":"UserCreated","tenant":"acme","part":2,"payload":{"email":"gh@mefi.in"}}');
begin;
-- A JSON string payload, a tenant of another type, partition 0.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"p2","aggregatetype":"P_@AGG@","aggregateid":"k2","type":"UserUpdated","tenant":5,"part":0,"payload":"{\"s\": 1}"}');
-- The same payload shape as p1 under another route: Debezium's envelope
-- schema cache is keyed by the payload schema.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"p3","aggregatetype":"Q_@AGG@","aggregateid":"k3","type":"UserDeleted","tenant":"acme","part":5,"payload":{"email":"x@y.z"}}');
-- A different payload shape under the second route.
select pg_logical_emit_message(true, 'outbox_@AGG@', '{"id":"p4","aggregatetype":"Q_@AGG@","aggregateid":"k4","type":"UserDeleted","tenant":"acme","part":1,"payload":{"n":1.5}}');
commit;

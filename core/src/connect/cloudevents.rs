//! Debezium's `io.debezium.converters.CloudEventsConverter` (to be written).

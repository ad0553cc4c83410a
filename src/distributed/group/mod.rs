//! Kafka's group membership with Connect's protocol (being written).

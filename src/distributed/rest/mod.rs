//! Connect's REST API over a [`super::api::Herder`] (being written).

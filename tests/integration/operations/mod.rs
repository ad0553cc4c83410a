//! Operating walrelay.

/// Metrics and lag alerts, an invalidated slot, heartbeats, idle streams.
mod monitoring;
/// A hot standby taking over, and the failures that stop walrelay.
mod stops_and_takeover;

//! `walrelay status`: a human-readable view of a running walrelay, read
//! from the typed JSON its listener serves at `/api/state`.
//!
//! A process runs one pipeline or several; the view has a section per
//! pipeline (with a table of them all first when there are several): its
//! state, with the reason `/readyz` gives when it is not ready; the slot,
//! positions and lag of a WAL pipeline, with the catch-up line the source
//! logs while it drains a backlog, or the shards, backlog, batches and
//! errors of a polling one; events and their rates between two readings,
//! latency, errors, protocol and topics. [`client`] reads the listener
//! (hyper's client), `snapshot` judges each pipeline's state and the
//! rates, `view` writes the lines, `run` reads once or redraws every
//! interval. It only reads: it never talks to PostgreSQL or Kafka, never
//! changes the process it looks at, and never parses the Prometheus text.

use std::io;
use std::time::Duration;

pub mod client;
mod run;
mod snapshot;
mod view;

pub use client::Access;
pub(crate) use client::{ClientError, DEFAULT_TIMEOUT};
pub(crate) use run::run_status;
pub use run::run_status_to;
pub use snapshot::{PipelineState, Rates, Snapshot};
pub use view::render;

/// Errors of `walrelay status`.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The listener could not be read.
    #[error(transparent)]
    Read(#[from] ClientError),
    /// The Ctrl-C handler of `--watch` could not be installed.
    #[error("cannot install the interrupt handler")]
    Signal(#[source] io::Error),
    /// Writing the view failed (closed stdout).
    #[error("cannot write the status view")]
    Output(#[source] io::Error),
    /// `--pipeline` names a pipeline the process does not run.
    #[error("walrelay at {url} runs no pipeline {name:?}; it runs {known}")]
    NoSuchPipeline {
        /// The state's URL.
        url: String,
        /// The name asked for.
        name: String,
        /// The pipelines it runs, comma-separated.
        known: String,
    },
}

/// What `walrelay status` reads and how.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// The state, e.g. `http://127.0.0.1:9187/api/state`.
    pub(crate) url: String,
    /// Refresh every this often until Ctrl-C; `None` shows the view once.
    pub(crate) watch: Option<Duration>,
    /// Bound on each reading.
    pub(crate) timeout: Duration,
    /// Show only this pipeline; `None` shows every pipeline.
    pub(crate) pipeline: Option<String>,
    /// How to reach a secured listener (TLS, client certificate, basic auth).
    pub(crate) access: Access,
}

impl StatusOptions {
    /// One view of the state at `url`, every pipeline, with the default
    /// timeout.
    pub fn new(url: impl Into<String>) -> Self {
        StatusOptions {
            url: url.into(),
            watch: None,
            timeout: DEFAULT_TIMEOUT,
            pipeline: None,
            access: Access::default(),
        }
    }

    /// The same options, reaching the listener as `access` says.
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// The options for a listen address such as `127.0.0.1:9187`, or a URL
    /// of the listener (see [`client::page_url`]).
    pub(crate) fn for_addr(addr: &str) -> Self {
        StatusOptions::new(client::state_url(addr))
    }
}

/// The state of the walrelay listening at `addr` (a listen address or a
/// URL, see [`client::page_url`]), read now within [`DEFAULT_TIMEOUT`].
pub async fn snapshot(addr: &str) -> Result<Snapshot, ClientError> {
    Snapshot::take(
        &client::Client::new(DEFAULT_TIMEOUT)?,
        &client::state_url(addr),
    )
    .await
}

#[cfg(test)]
mod tests;

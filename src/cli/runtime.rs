//! The tokio runtimes: a small one for the commands that run a few
//! requests (`check`, `status`, `replay`), and the relay's, shaped by
//! `[runtime]`.

use tokio::runtime::{Builder, Runtime};

use super::CliError;
use crate::config::ProcessConfig;

/// Worker threads of a command's runtime.
const COMMAND_WORKERS: usize = 2;
/// The name of the runtimes' threads.
const THREAD_NAME: &str = "walrelay";

/// The runtime of a command other than `run`.
pub(super) fn command() -> Result<Runtime, CliError> {
    Builder::new_multi_thread()
        .worker_threads(COMMAND_WORKERS)
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()
        .map_err(CliError::Runtime)
}

/// A multi-threaded runtime of `workers` threads (a distributed worker:
/// its pipelines come and go, so the runtime is not shaped by one).
pub(super) fn command_with(workers: usize) -> Result<Runtime, CliError> {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()
        .map_err(CliError::Runtime)
}

/// The relay's runtime: `runtime.worker_threads = 0` keeps every task on
/// the main thread, so handing a batch from the source to the sink is a
/// local wake-up rather than a cross-thread one (librdkafka has its own
/// threads either way).
pub(super) fn relay(config: &ProcessConfig) -> Result<Runtime, CliError> {
    let mut builder = match config.runtime().worker_threads {
        0 => Builder::new_current_thread(),
        n => {
            let mut b = Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()
        .map_err(CliError::Runtime)
}

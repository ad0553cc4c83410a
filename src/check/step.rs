//! One bounded step of a check: the error a step can end in, the timeout
//! every network step runs under (an unreachable server costs one row, not
//! a hang) and the SQLSTATE a fix is chosen by. It must never produce a
//! row or word a fix: the check that ran the step does.

use std::future::Future;
use std::time::Duration;

use rdkafka::error::KafkaError;

use crate::postgres::catalog;

/// Why a step of a check could not be completed.
#[derive(Debug, thiserror::Error)]
pub(super) enum CheckError {
    /// A step did not finish within its bound.
    #[error("{what} did not answer within {timeout:?}")]
    Timeout {
        /// The step.
        what: String,
        /// The bound.
        timeout: Duration,
    },
    /// A catalog query failed.
    #[error("{context}")]
    Sql {
        /// What was being read.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Catalog work shared with the relay failed.
    #[error(transparent)]
    Catalog(#[from] catalog::CatalogError),
    /// A Kafka request failed.
    #[error("{context}")]
    Kafka {
        /// What was being asked.
        context: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
}

/// Runs `fut`, failing with [`CheckError::Timeout`] after `timeout`.
pub(super) async fn bounded<T, E>(
    what: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, CheckError>
where
    E: Into<CheckError>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(CheckError::Timeout {
            what: what.to_owned(),
            timeout,
        }),
    }
}

/// A catalog read with its context.
pub(super) async fn read<T>(
    what: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, CheckError> {
    let fut = async {
        fut.await.map_err(|source| CheckError::Sql {
            context: format!("cannot read {what}"),
            source,
        })
    };
    bounded(what, timeout, fut).await
}

/// The SQLSTATE behind a [`CheckError`], if the server sent one.
pub(super) fn sqlstate(e: &CheckError) -> Option<&str> {
    match e {
        CheckError::Sql { source, .. }
        | CheckError::Catalog(catalog::CatalogError::Sql { source, .. }) => {
            source.code().map(tokio_postgres::error::SqlState::code)
        }
        _ => None,
    }
}

//! Connect's REST API (Kafka Connect 4.1.1's `ConnectorsResource`,
//! `ConnectorPluginsResource`, `RootResource`, `LoggingResource`) over a
//! [`super::api::Herder`]: same routes, status codes and JSON bytes, so
//! tools written for Connect work against `walrelay connect-distributed`.
//!
//! Owns the REST layer; its parts: [`config`] (the worker keys),
//! [`server`] (listeners, TLS, CORS, basic auth, Jersey's errors),
//! [`routes`] (paths), [`handlers`] (what each answers), [`json`]
//! (Jackson's output), [`body`] (request bodies), [`auth`], [`tls`].

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod config;
pub(crate) mod handlers;
pub(crate) mod json;
pub(crate) mod routes;
pub(crate) mod server;
pub(crate) mod tls;

#[cfg(test)]
mod tests;

#[allow(unused_imports)] // wired by connect-distributed
pub(crate) use config::{RestConfig, RestConfigError};
#[allow(unused_imports)] // wired by connect-distributed
pub(crate) use server::serve;

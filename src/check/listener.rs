//! The metrics listener's row: a listener bound beyond loopback should
//! speak TLS and authenticate its clients (basic auth, or verified client
//! certificates), as its web configuration file can make it.
//!
//! Owns judging `[metrics] listen` and `web_config_file` together. It only
//! reads the configuration (and the files it names): it never connects to
//! the listener. A listener open to the network is a warning, never a
//! failure: walrelay runs, and a proxy or a firewall may guard it.

use std::net::{IpAddr, SocketAddr};

use crate::config::Config;
use crate::metrics::web::ClientAuth;

use super::report::{CheckReport, METRICS_LISTENER};

/// Adds the row of the metrics listener of `config` to `report`.
pub(super) fn check_listener(config: &Config, report: &mut CheckReport) {
    let listen = config.metrics.listen.as_str();
    if listen.is_empty() {
        return report.pass(METRICS_LISTENER, "disabled (metrics.listen is empty)");
    }
    if is_loopback(listen) {
        return report.pass(METRICS_LISTENER, format!("{listen}: loopback only"));
    }
    let web = match config.metrics.web() {
        Ok(web) => web,
        Err(e) => {
            return report.fail(
                METRICS_LISTENER,
                crate::chain::DisplayChain(&e).to_string(),
                "fix the web configuration file of metrics.web_config_file",
            )
        }
    };
    let tls = web.acceptor().is_some();
    let client_certs = web.client_auth() == Some(ClientAuth::RequireAndVerifyClientCert);
    let authenticated = web.has_basic_auth() || client_certs;
    let missing = match (tls, authenticated) {
        (true, true) => {
            let how = if web.has_basic_auth() {
                "basic auth"
            } else {
                "verified client certificates"
            };
            return report.pass(METRICS_LISTENER, format!("{listen}: TLS and {how}"));
        }
        (false, true) => "without TLS (credentials and metrics cross the network in clear)",
        (true, false) => "without authentication (anyone who reaches it reads it)",
        (false, false) => "without TLS or authentication (anyone who reaches it reads it)",
    };
    report.warn(
        METRICS_LISTENER,
        format!("{listen} is reachable beyond loopback {missing}"),
        "set [metrics] web_config_file to a web configuration file (the Prometheus \
         exporters' format) with tls_server_config and basic_auth_users or client_auth_type: \
         RequireAndVerifyClientCert, or listen on 127.0.0.1",
    );
}

/// Whether `listen` (`host:port`) is bound to loopback only: 127.0.0.0/8,
/// ::1 or `localhost`. An empty host is every interface.
fn is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return addr.ip().is_loopback();
    }
    let host = listen.rsplit_once(':').map_or(listen, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::CheckStatus;

    /// The row for `listen` with the web configuration `web` (YAML), if any.
    fn row(listen: &str, web: Option<&str>) -> (CheckStatus, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::from_toml(
            "[postgres]\nhost = \"h\"\nuser = \"u\"\ndbname = \"d\"\n\
             [kafka]\nbootstrap_servers = \"k:9092\"\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        config.metrics.listen = listen.into();
        if let Some(text) = web {
            let path = dir.path().join("web.yml");
            std::fs::write(&path, text).unwrap();
            config.metrics.web_config_file = Some(path);
        }
        let mut report = CheckReport::default();
        check_listener(&config, &mut report);
        let r = report.row(METRICS_LISTENER).unwrap();
        (r.status, r.detail.clone())
    }

    #[test]
    fn loopback_addresses() {
        for listen in [
            "127.0.0.1:9187",
            "127.1.2.3:1",
            "[::1]:9187",
            "localhost:9187",
        ] {
            assert!(is_loopback(listen), "{listen}");
        }
        for listen in [
            "0.0.0.0:9187",
            ":9187",
            "[::]:9187",
            "10.0.0.1:9187",
            "metrics.internal:9187",
        ] {
            assert!(!is_loopback(listen), "{listen}");
        }
    }

    #[test]
    fn warns_beyond_loopback_without_tls_or_authentication() {
        assert_eq!(row("127.0.0.1:9187", None).0, CheckStatus::Pass);
        assert_eq!(row("", None).0, CheckStatus::Pass);
        let (status, detail) = row("0.0.0.0:9187", None);
        assert_eq!(status, CheckStatus::Warn);
        assert!(detail.contains("without TLS or authentication"), "{detail}");
        let users = format!(
            "basic_auth_users:\n  a: '{}'\n",
            bcrypt::hash("p", 4).unwrap()
        );
        let (status, detail) = row("0.0.0.0:9187", Some(&users));
        assert_eq!(status, CheckStatus::Warn);
        assert!(detail.contains("without TLS ("), "{detail}");
    }
}

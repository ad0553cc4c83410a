//! What `walrelay --version` says: the package version, the commit the
//! binary was built from, its cargo features, target and profile (from
//! `build.rs`), and the versions of the C libraries linked into it, read at
//! run time from the libraries themselves (librdkafka and OpenSSL: built
//! in with the `static` feature, the system's otherwise).

use std::sync::OnceLock;

/// The version text, built once.
pub fn line() -> &'static str {
    static LINE: OnceLock<String> = OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (commit {}; features {}; target {}; profile {}; librdkafka {}; {})",
            env!("CARGO_PKG_VERSION"),
            env!("WALRELAY_BUILD_COMMIT"),
            env!("WALRELAY_BUILD_FEATURES"),
            env!("WALRELAY_BUILD_TARGET"),
            env!("WALRELAY_BUILD_PROFILE"),
            rdkafka::util::get_rdkafka_version().1,
            openssl::version::version(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_commit_the_features_and_the_libraries() {
        let l = line();
        assert!(l.starts_with(env!("CARGO_PKG_VERSION")), "{l}");
        let commit = env!("WALRELAY_BUILD_COMMIT");
        assert!(
            !commit.is_empty() && l.contains(&format!("commit {commit};")),
            "{l}"
        );
        assert!(l.contains("librdkafka 2."), "{l}");
        assert!(l.contains("OpenSSL "), "{l}");
        assert!(
            l.contains(&format!("target {}", env!("WALRELAY_BUILD_TARGET"))),
            "{l}"
        );
    }
}

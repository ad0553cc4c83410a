//! Build metadata for `walrelay --version` (src/cli/version.rs): the
//! commit the binary was built from, the cargo features it was built with,
//! the target and the profile, as compile-time environment variables.
//!
//! The commit is `WALRELAY_COMMIT` when set (a build from a source archive),
//! else `git describe --always --dirty --abbrev=12`, else `unknown`.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=WALRELAY_COMMIT");
    watch_git_head();
    let commit = env::var("WALRELAY_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=WALRELAY_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=WALRELAY_BUILD_FEATURES={}", features());
    let target = env::var("TARGET").unwrap_or_default();
    println!("cargo:rustc-env=WALRELAY_BUILD_TARGET={target}");
    println!("cargo:rustc-env=WALRELAY_BUILD_PROFILE={}", profile());
    pack_relative_relocs();
}

/// Links the binaries with packed relative relocations (DT_RELR) on
/// Linux with glibc. A position-independent walrelay carries about 70,000
/// relative relocations (1.7 MB of `.rela.dyn`) that the loader reads at
/// every start, and those pages stay resident for the process's life; the
/// packed table is a few kilobytes. GNU ld 2.38 and later pack them only
/// when the C library supports it (glibc 2.36, `GLIBC_ABI_DT_RELR`) and
/// ignore the option otherwise, so older systems get the usual table. Not
/// for musl (the static build): its loader before 1.2.4 cannot read them.
fn pack_relative_relocs() {
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let libc = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && libc == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// The commit of the working tree, `-dirty` when it has changes.
fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_owned())
}

/// Rebuilds when HEAD moves: HEAD itself and the branch it points to.
fn watch_git_head() {
    let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir", "--symbolic-full-name", "HEAD"])
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let Some(dir) = lines.next() else { return };
    println!("cargo:rerun-if-changed={dir}/HEAD");
    if let Some(branch) = lines.next().filter(|b| b.starts_with("refs/")) {
        println!("cargo:rerun-if-changed={dir}/{branch}");
    }
    println!("cargo:rerun-if-changed={dir}/index");
}

/// The enabled features of this package, comma-separated (`default` left
/// out), or `none`.
fn features() -> String {
    let mut names: Vec<String> = env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .filter(|f| f != "DEFAULT")
        .map(|f| f.to_lowercase().replace('_', "-"))
        .collect();
    names.sort();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

/// The cargo profile: the last component of OUT_DIR's `target/<profile>/`
/// (cargo gives build scripts only `debug`/`release` in PROFILE).
fn profile() -> String {
    let out = env::var("OUT_DIR").unwrap_or_default();
    let parts: Vec<&str> = out.split(std::path::MAIN_SEPARATOR).collect();
    parts
        .iter()
        .position(|p| *p == "build")
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| parts.get(i))
        .map(|p| (*p).to_owned())
        .unwrap_or_else(|| env::var("PROFILE").unwrap_or_default())
}

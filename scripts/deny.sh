#!/usr/bin/env bash
# The dependency policy (deny.toml) checked with cargo-deny: licences,
# security advisories (the RustSec database), duplicate versions and
# sources. A phase of scripts/test.sh.
#
# Usage: scripts/deny.sh
#
# cargo-deny CARGO_DENY_VERSION is installed with `cargo install --locked`
# when missing (a few minutes, first run only). The advisory database is
# fetched from GitHub into $CARGO_HOME/advisory-dbs/ as cargo-deny does;
# where GitHub cannot be reached (these machines reach the package
# registries only), the copy already there is used and its date printed, or
# one is cloned from WALRELAY_ADVISORY_DB (a path or URL of a git mirror of
# github.com/rustsec/advisory-db). With neither, licences, bans and sources
# are still checked and the advisories check is skipped with a line saying
# so and how to enable it (a fresh machine without GitHub has no way to get
# the database; the tests must not fail for the network). Offline, every
# platform's crates are fetched first (`cargo fetch`), since cargo-deny's
# `cargo metadata --offline` needs them all.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

CARGO_DENY_VERSION=0.20.2
# cargo-deny's directory for the default database (its URL's hash).
DB=${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691

installed=$(cargo deny --version 2>/dev/null || true)
if [[ $installed != "cargo-deny $CARGO_DENY_VERSION" ]]; then
    note "cargo install cargo-deny $CARGO_DENY_VERSION (first run only; found: ${installed:-none})"
    cargo install --quiet --locked cargo-deny --version "$CARGO_DENY_VERSION" >&2
fi

cd "$REPO_ROOT"
offline=()
checks=(all)
if ! cargo deny fetch db >/dev/null 2>&1; then
    if [[ ! -d $DB/crates && -n ${WALRELAY_ADVISORY_DB:-} ]]; then
        note "cloning the advisory database from $WALRELAY_ADVISORY_DB"
        rm -rf "$DB"
        mkdir -p "$(dirname "$DB")"
        git clone --quiet "$WALRELAY_ADVISORY_DB" "$DB" ||
            die "cannot clone the advisory database from WALRELAY_ADVISORY_DB=$WALRELAY_ADVISORY_DB"
    fi
    if [[ -d $DB/crates ]]; then
        note "github.com unreachable: checking advisories against the local copy of the database, last changed $(git -C "$DB" log -1 --format=%cs)"
    else
        printf 'skip  advisories: the RustSec database cannot be fetched (no network to github.com) and there is no copy in %s; set WALRELAY_ADVISORY_DB to a git mirror of it\n' "$DB"
        checks=(bans licenses sources)
    fi
    # cargo-deny reads `cargo metadata --offline`, which needs every
    # platform's crates in the cache, not only this one's.
    cargo fetch --locked --quiet
    offline=(--offline)
fi
cargo deny "${offline[@]}" --log-level error check --show-stats "${checks[@]}"

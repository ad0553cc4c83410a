#!/usr/bin/env bash
# The headless browser of the operator page's tests
# (tests/integration/operator_page.rs) and of scripts/screenshot-page.sh:
# Debian's `chromium`. Installs it with apt-get when it is missing (which
# needs root; scripts/test.sh runs this before the tests, so a clean CI
# machine gets it), then prints its path. Later runs find it and take no
# time. Owns nothing but that package; never starts a browser.
#
# Usage: scripts/browser.sh
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

PKG=chromium

has_candidate() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
    [[ $policy == *"Candidate: "[!\(]* ]]
}

if ! command -v chromium >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "chromium not found and no apt-get to install it"
    [[ $(id -u) -eq 0 ]] || die "chromium is needed: run as root, or apt-get install $PKG"
    if ! has_candidate "$PKG"; then
        note "apt-get update"
        apt-get update -qq >/dev/null
        has_candidate "$PKG" || die "Debian package $PKG is not available from the configured apt sources"
    fi
    note "apt-get install $PKG (a few minutes the first time)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$PKG" >/dev/null
    command -v chromium >/dev/null 2>&1 || die "apt-get installed $PKG but there is no chromium command"
fi
command -v chromium

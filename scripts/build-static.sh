#!/usr/bin/env bash
# The static walrelay binary: target x86_64-unknown-linux-musl, cargo feature
# `static` (OpenSSL and zlib compiled from source; librdkafka, lz4 and zstd
# are always), profile `dist` (release, stripped). The result needs nothing
# from the host but the kernel: no libc, no libssl, no dynamic loader.
# Checks that the ELF file has no interpreter and no needed libraries, then
# prints its path.
#
# Usage: scripts/build-static.sh
#
# Needs musl-gcc (Debian's musl-tools) for the C parts, perl and make for
# OpenSSL's build, protoc (need_build_tools), and the Rust standard library
# for the target (`rustup target add x86_64-unknown-linux-musl`, done here
# when rustup is there and the target is missing). Cargo builds into
# $WALRELAY_STATIC_TARGET_DIR when set (scripts/test.sh's build cache), else
# $CARGO_TARGET_DIR, else target/static/ (a directory of its own, so that it
# neither waits on nor disturbs the debug and release builds).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

TARGET=x86_64-unknown-linux-musl
PROFILE=dist
# The features of the shipped binary; WALRELAY_STATIC_FEATURES replaces them
# (a comparison build, e.g. static without mimalloc).
FEATURES=${WALRELAY_STATIC_FEATURES:-static}

need_build_tools
apt_install musl-gcc musl-tools
apt_install perl perl
apt_install make make
apt_install readelf binutils
if ! rustc --print sysroot >/dev/null 2>&1 ||
    [[ ! -d "$(rustc --print sysroot)/lib/rustlib/$TARGET" ]]; then
    command -v rustup >/dev/null 2>&1 ||
        die "the Rust standard library for $TARGET is missing and there is no rustup to add it"
    note "rustup target add $TARGET (first run only)"
    rustup target add "$TARGET" >&2
fi

cd "$REPO_ROOT"
export CARGO_TARGET_DIR=${WALRELAY_STATIC_TARGET_DIR:-${CARGO_TARGET_DIR:-$REPO_ROOT/target/static}}
# The cc crate takes musl-gcc for the target's C code; OpenSSL's and
# librdkafka's own build systems take CC from the same variables. The link
# stays rustc's own for the target (its bundled musl and start files, a
# static PIE): musl-gcc as the linker makes a dynamic PIE that asks for
# /lib/ld-musl-x86_64.so.1 and crashes at start.
export CC_x86_64_unknown_linux_musl=musl-gcc
cargo build --locked --profile "$PROFILE" --target "$TARGET" --features "$FEATURES" --bin walrelay >&2
BIN=$CARGO_TARGET_DIR/$TARGET/$PROFILE/walrelay
[[ -x $BIN ]] || die "cargo did not write $BIN"

# Static: no program interpreter and no shared library needed.
headers=$(readelf --program-headers --dynamic "$BIN")
if grep -q 'INTERP' <<<"$headers" || grep -q '(NEEDED)' <<<"$headers"; then
    grep -E 'INTERP|NEEDED' <<<"$headers" >&2
    die "$BIN is not static: it asks for the libraries above"
fi
printf '%s\n' "$BIN"

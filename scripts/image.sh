#!/usr/bin/env bash
# walrelay's container image, built and checked without a daemon.
#
# Usage:
#   scripts/image.sh context DIR   the build context of deploy/Containerfile in
#                                  DIR: the static binary (scripts/build-static.sh),
#                                  Debian's CA bundle, passwd and group
#   scripts/image.sh build         builds the image walrelay:<version> with
#                                  Debian's buildah (chroot isolation, vfs
#                                  storage under .cache/buildah/) and writes it
#                                  as an OCI archive to target/image/, with the
#                                  static binary's SBOM beside it (CycloneDX
#                                  1.5 JSON, cargo-cyclonedx: every crate
#                                  compiled into it, build-time ones included,
#                                  as OpenSSL's source comes in through one)
#   scripts/image.sh check         checks what a user relies on (the image
#                                  must be built): its configuration (user,
#                                  entrypoint, command, port, labels, no
#                                  healthcheck), its size, its files (no shell,
#                                  nothing but the binary, the CA bundle,
#                                  passwd and group), that it holds no secret,
#                                  and that the binary from its root
#                                  filesystem runs the demo (scripts/demo.sh
#                                  --root --env) against the running test
#                                  environment's PostgreSQL and Kafka
#                                  (scripts/env.sh up)
#   scripts/image.sh all           build, then check (the CI phase)
#
# Needs root (buildah's chroot isolation, and chroot for the demo). buildah,
# and ca-certificates for the bundle, are installed with apt-get when
# missing; cargo-cyclonedx CARGO_CYCLONEDX_VERSION with `cargo install`.
# Owns .cache/buildah/ and target/image/; the image's own storage is
# .cache/buildah/storage, never /var/lib/containers.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

STORE=$REPO_ROOT/.cache/buildah
OUT=$REPO_ROOT/target/image
# The goal of the issue that asked for the image: under 25 MB, as a registry
# stores it and a pull moves it (its layer compressed with gzip).
MAX_COMPRESSED_BYTES=$((25 * 1000 * 1000))
USER_ID=10001
CARGO_CYCLONEDX_VERSION=0.5.9
# Every file of the image, nothing more (directories aside).
FILES=(
    etc/group
    etc/passwd
    etc/ssl/certs/ca-certificates.crt
    usr/local/bin/walrelay
)

VERSION=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml")
SOURCE=$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml")
IMAGE=localhost/walrelay:$VERSION
# The commit, as build.rs writes it into `walrelay --version`.
REVISION=$(git -C "$REPO_ROOT" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)

buildah_() {
    buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver vfs "$@"
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "$1 needs root (buildah's chroot isolation and chroot)"
}

# The build context in DIR.
context() {
    local dir=$1 bin
    bin=$("$SCRIPT_DIR/build-static.sh")
    mkdir -p "$dir"
    install -m 0755 "$bin" "$dir/walrelay"
    ca_bundle "$dir/ca-certificates.crt"
    printf 'walrelay:x:%s:%s:walrelay:/nonexistent:/sbin/nologin\n' "$USER_ID" "$USER_ID" >"$dir/passwd"
    printf 'walrelay:x:%s:\n' "$USER_ID" >"$dir/group"
    chmod 0644 "$dir/passwd" "$dir/group"
}

# Debian's CA bundle: the certificates the ca-certificates package ships,
# as its update-ca-certificates concatenates them for
# /etc/ssl/certs/ca-certificates.crt.
ca_bundle() {
    local to=$1
    [[ -s /etc/ssl/certs/ca-certificates.crt ]] || apt_install update-ca-certificates ca-certificates
    dpkg -S /usr/share/ca-certificates/mozilla >/dev/null 2>&1 ||
        die "the CA certificates are not Debian's ca-certificates package's"
    install -m 0644 /etc/ssl/certs/ca-certificates.crt "$to"
}

build() {
    need_root "image.sh build"
    apt_install buildah buildah
    local ctx=$STORE/context created
    rm -rf "$ctx"
    context "$ctx"
    created=$(git -C "$REPO_ROOT" log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)
    note "buildah build $IMAGE (revision $REVISION)"
    buildah_ build --isolation chroot --layers=false \
        --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
        --build-arg "SOURCE=$SOURCE" --build-arg "CREATED=$created" \
        -f "$REPO_ROOT/deploy/Containerfile" -t "$IMAGE" "$ctx" >&2
    mkdir -p "$OUT"
    rm -f "$OUT/walrelay-$VERSION.oci.tar"
    buildah_ push --quiet "$IMAGE" "oci-archive:$OUT/walrelay-$VERSION.oci.tar:$IMAGE" >&2
    sbom "$OUT/walrelay-$VERSION.cdx.json"
    note "image $IMAGE, archive $OUT/walrelay-$VERSION.oci.tar, SBOM $OUT/walrelay-$VERSION.cdx.json"
}

# The static binary's SBOM, written to FILE: the crates of the walrelay
# binary for the static build's target and features.
sbom() {
    local to=$1 installed
    installed=$(cargo cyclonedx --version 2>/dev/null || true)
    if [[ $installed != *" $CARGO_CYCLONEDX_VERSION" ]]; then
        note "cargo install cargo-cyclonedx $CARGO_CYCLONEDX_VERSION (first run only; found: ${installed:-none})"
        cargo install --quiet --locked cargo-cyclonedx --version "$CARGO_CYCLONEDX_VERSION" >&2
    fi
    # It writes next to the manifest; the name is its own.
    (cd "$REPO_ROOT" && SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s) \
        cargo cyclonedx --manifest-path Cargo.toml --describe binaries --format json \
        --spec-version 1.5 --target x86_64-unknown-linux-musl --features static -q >&2)
    mv "$REPO_ROOT/walrelay_bin.cdx.json" "$to"
}

# --- check -------------------------------------------------------------------

FAILED=0
fail() {
    printf 'FAIL  %s\n' "$*"
    FAILED=1
}
ok() { printf 'ok    %s\n' "$*"; }

check_config() {
    local cfg
    cfg=$(buildah_ inspect --type image "$IMAGE")
    IMAGE_CONFIG=$cfg python3 - "$VERSION" "$REVISION" "$SOURCE" "$USER_ID" <<'PY' || FAILED=1
import json, os, sys
version, revision, source, uid = sys.argv[1:5]
c = json.loads(os.environ["IMAGE_CONFIG"])["OCIv1"]["config"]
labels = c.get("Labels") or {}
want = {
    "User": f"{uid}:{uid}",
    "Entrypoint": ["/usr/local/bin/walrelay"],
    "Cmd": ["run", "--config", "/etc/walrelay/walrelay.toml"],
    "ExposedPorts": {"9187/tcp": {}},
    "StopSignal": "SIGTERM",
}
bad = [f"{k}: {c.get(k)!r}, expected {v!r}" for k, v in want.items() if c.get(k) != v]
for k, v in {"org.opencontainers.image.version": version,
             "org.opencontainers.image.revision": revision,
             "org.opencontainers.image.source": source,
             "org.opencontainers.image.licenses": "Apache-2.0"}.items():
    if labels.get(k) != v:
        bad.append(f"label {k}: {labels.get(k)!r}, expected {v!r}")
if "Healthcheck" in c:
    bad.append("a HEALTHCHECK is set: the image has no shell to run it; probes use /readyz")
secretish = [e.split("=", 1)[0] for e in c.get("Env", [])
             if any(w in e.split("=", 1)[0].upper() for w in ("PASSWORD", "SECRET", "TOKEN", "KEY"))]
if secretish:
    bad.append(f"environment variables that look like secrets: {secretish}")
for b in bad:
    print(f"FAIL  image config {b}")
if not bad:
    print(f"ok    image config: user {c['User']}, entrypoint {c['Entrypoint']}, port 9187/tcp, "
          f"labels version {version} revision {revision} source {source}, no healthcheck")
sys.exit(1 if bad else 0)
PY
}

# The files of the mounted root ROOT: exactly FILES, the binary static and
# executable, no secret.
check_files() {
    local root=$1 listed expected f
    listed=$(cd "$root" && find . -not -type d | sed 's|^\./||' | sort)
    expected=$(printf '%s\n' "${FILES[@]}" | sort)
    if [[ $listed == "$expected" ]]; then
        ok "image files: exactly ${FILES[*]} (no shell, no package manager)"
    else
        fail "image files differ from the expected set (< expected, > found):"
        diff <(printf '%s\n' "$expected") <(printf '%s\n' "$listed") | sed 's/^/        /'
    fi
    for f in bin/sh usr/bin/sh bin/bash bin/busybox; do
        [[ ! -e $root/$f ]] || fail "image has a shell: /$f"
    done
    # A private key in PEM: its marker followed by a base64 body.
    local keys
    keys=$(LC_ALL=C grep -rlaE -- '-----BEGIN ([A-Z]+ )?PRIVATE KEY-----[[:space:]]*[A-Za-z0-9+/]{40}' "$root" || true)
    if [[ -n $keys ]]; then
        fail "a PEM private key is in the image: $keys"
    else
        ok "no private key in the image"
    fi
    [[ $(stat -c '%a %u' "$root/usr/local/bin/walrelay") == "755 0" ]] ||
        fail "/usr/local/bin/walrelay: mode and owner $(stat -c '%a %u' "$root/usr/local/bin/walrelay"), expected 755 0"
    if readelf --program-headers --dynamic "$root/usr/local/bin/walrelay" | grep -qE 'INTERP|\(NEEDED\)'; then
        fail "/usr/local/bin/walrelay needs a dynamic loader or shared libraries"
    else
        ok "/usr/local/bin/walrelay is static ($(stat -c %s "$root/usr/local/bin/walrelay") bytes)"
    fi
    grep -q "^walrelay:x:$USER_ID:$USER_ID:" "$root/etc/passwd" || fail "/etc/passwd has no user walrelay ($USER_ID)"
}

# The image's size: its one layer as a tar (what `podman images` counts)
# and compressed with gzip (what a registry stores and a pull moves).
check_size() {
    local root=$1 raw gz
    raw=$(tar -C "$root" -cf - . | wc -c)
    gz=$(tar -C "$root" -cf - . | gzip -6 | wc -c)
    printf 'size  image layer %s bytes, %s bytes compressed (gzip -6)\n' "$raw" "$gz"
    if ((gz > MAX_COMPRESSED_BYTES)); then
        fail "image size: $gz bytes compressed, over $MAX_COMPRESSED_BYTES"
    else
        ok "image size: $((gz / 1000000)) MB compressed, under 25 MB"
    fi
}

# The image's binary, as its user, with only its files.
check_run() {
    local root=$1 version
    if version=$(chroot --userspec="$USER_ID:$USER_ID" "$root" /usr/local/bin/walrelay --version 2>&1); then
        ok "walrelay --version in the image: $version"
        grep -qE 'features ([a-z0-9-]+,)*static[,;]' <<<"$version" ||
            fail "the image's binary is not the static build: $version"
    else
        fail "walrelay --version in the image failed: $version"
    fi
    if "$SCRIPT_DIR/demo.sh" --root "$root" --env 3 >&2; then
        ok "the demo ran with the image's binary (3 orders, 3 events read back)"
    else
        fail "the demo with the image's binary failed (its output above)"
    fi
}

# The SBOM beside the archive names the binary and the C libraries built
# into it, at the versions Cargo.lock pins.
check_sbom() {
    local file=$OUT/walrelay-$VERSION.cdx.json
    [[ -f $file ]] || {
        fail "no SBOM at $file"
        return
    }
    python3 - "$file" "$REPO_ROOT/Cargo.lock" "$VERSION" <<'PY' || FAILED=1
import json, sys, tomllib
bom = json.load(open(sys.argv[1]))
lock = {(p["name"]): p["version"] for p in tomllib.load(open(sys.argv[2], "rb"))["package"]}
have = {c["name"]: c.get("version") for c in bom.get("components", [])}
bad = []
top = bom.get("metadata", {}).get("component", {})
if (top.get("name"), top.get("version")) != ("walrelay", sys.argv[3]):
    bad.append(f"the SBOM describes {top.get('name')} {top.get('version')}, not walrelay {sys.argv[3]}")
for c in ("openssl-src", "rdkafka-sys", "libz-sys", "zstd-sys", "lz4-sys", "tokio-postgres"):
    if have.get(c) != lock.get(c):
        bad.append(f"{c}: {have.get(c)} in the SBOM, {lock.get(c)} in Cargo.lock")
for b in bad:
    print(f"FAIL  SBOM {b}")
if not bad:
    print(f"ok    SBOM: CycloneDX {bom['specVersion']}, {len(have)} components, "
          f"OpenSSL source {have['openssl-src']}, librdkafka {have['rdkafka-sys']}")
sys.exit(1 if bad else 0)
PY
}

check() {
    need_root "image.sh check"
    buildah_ inspect --type image "$IMAGE" >/dev/null 2>&1 ||
        die "no image $IMAGE: run scripts/image.sh build first"
    local ctr root
    check_config
    check_sbom
    ctr=$(buildah_ from --pull-never "$IMAGE")
    CONTAINER=$ctr
    trap 'buildah_ umount "$CONTAINER" >/dev/null 2>&1; buildah_ rm "$CONTAINER" >/dev/null 2>&1' EXIT
    root=$(buildah_ mount "$ctr")
    check_files "$root"
    check_size "$root"
    check_run "$root"
    ((FAILED == 0)) || die "image checks failed"
}

case ${1:-} in
    context)
        (($# == 2)) || die "usage: image.sh context DIR"
        context "$2"
        ;;
    build) build ;;
    check) check ;;
    all)
        build
        check
        ;;
    *)
        sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

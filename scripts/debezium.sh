#!/usr/bin/env bash
# The real Debezium PostgreSQL connector with the outbox EventRouter, run on a
# Kafka Connect standalone (or distributed) worker: the reference walrelay's
# compatibility tests compare against. Jars come from Maven Central through
# mvn and are cached under .cache/debezium/<version>/ at the repository root.
#
# Usage:
#   debezium.sh fetch                       resolve the jars once (offline afterwards)
#   debezium.sh standalone DIR WORKER [CONN ...]
#                                           start ConnectStandalone in the background;
#                                           each CONN is a .properties or REST-form .json
#                                           file; with none, connectors come through the
#                                           REST API (http://127.0.0.1:$(cat DIR/rest_port))
#   debezium.sh distributed DIR WORKER      start ConnectDistributed in the background (WORKER
#                                           sets bootstrap.servers, group.id and the
#                                           config/offset/status storage topics); returns
#                                           once the REST API answers GET / (else stops it)
#   debezium.sh stop DIR                    SIGTERM, up to 30 s, then SIGKILL (either mode)
#   debezium.sh kill DIR                    SIGKILL (fault tests)
#   debezium.sh status DIR                  prints "running PID" (exit 0) or "stopped" (exit 3)
#   debezium.sh wait-streaming DIR SLOT PGURL
#                                           wait until SLOT is active in pg_replication_slots
#                                           and Debezium has started streaming from it
#   debezium.sh classpath                   prints the worker classpath and the plugin.path
#
# DIR layout: worker.properties (WORKER plus the overrides below), log4j2.xml,
# log (stdout of the JVM), pid, rest_port, offsets (offset.storage.file.filename,
# standalone only).
# Log lines of a connector or task carry Connect's connector context after the
# level, e.g. `[NAME|task-0] ` (Debezium's own threads inherit it), so several
# connectors on one worker can be told apart in DIR/log.
# The overrides: offset.storage.file.filename=DIR/offsets (standalone) and a
# loopback REST listener on a free port, always (distributed also advertises
# it: rest.advertised.host.name=127.0.0.1, rest.advertised.port=the port, so
# that requests forwarded to the leader stay on loopback); unless WORKER sets
# them, plugin.path=<cache>/plugin, plugin.discovery=service_load (skips a
# reflection scan of about 10 s; every Debezium jar has ServiceLoader
# manifests) and
# offset.flush.interval.ms=$WALRELAY_DBZ_OFFSET_FLUSH_MS (default 1000).
# None of them changes a produced record.
# WALRELAY_DBZ_HEAP_OPTS="-Xms1g -Xmx1g ..." replaces the worker's heap and GC
# options (default -Xms64m -Xmx512m -XX:+UseSerialGC).
# WALRELAY_OWNER_PID=<pid> in the environment of `standalone` or `distributed`
# makes a watchdog stop the worker once that process has exited (used by the
# Rust test helpers).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

DEBEZIUM_VERSION=3.6.1.Final
# The Connect runtime is the broker's Kafka version (kafka.sh). Debezium 3.6.1
# is built against Kafka 4.3.0 (version.kafka in debezium-build-parent) and
# runs unchanged on Connect 4.1.1; on 4.3.0 it produced identical records
# (tests/compat/observed.md). WALRELAY_CONNECT_VERSION overrides the version,
# for such cross-checks only: the cache is refetched on every change.
CONNECT_VERSION=${WALRELAY_CONNECT_VERSION:-$(sed -n 's/^KAFKA_VERSION=//p' "$SCRIPT_DIR/kafka.sh")}
[[ "$CONNECT_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    die "could not read KAFKA_VERSION from $SCRIPT_DIR/kafka.sh (got '$CONNECT_VERSION')"
# Connect 4 logs through slf4j 1.7; the log4j2 binding is not one of its
# dependencies (same pin as kafka.sh).
LOG4J_VERSION=2.24.3
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
CACHE_DIR=$REPO_ROOT/.cache/debezium/$DEBEZIUM_VERSION
CONNECT_LIBS=$CACHE_DIR/connect
PLUGIN_PATH=$CACHE_DIR/plugin
PLUGIN_LIBS=$PLUGIN_PATH/debezium-connector-postgres
STAMP=$CACHE_DIR/complete
START_TIMEOUT=${WALRELAY_DBZ_START_TIMEOUT:-120}
STOP_TIMEOUT=${WALRELAY_DBZ_STOP_TIMEOUT:-30}
OFFSET_FLUSH_MS=${WALRELAY_DBZ_OFFSET_FLUSH_MS:-1000}
# WALRELAY_DBZ_HEAP_OPTS replaces the heap and collector options (benches/
# size Debezium's JVM for the machine); tests keep the small defaults.
read -ra HEAP_OPTS <<<"${WALRELAY_DBZ_HEAP_OPTS:--Xms64m -Xmx512m -XX:+UseSerialGC}"
# file.encoding: Debezium's DecodeLogicalDecodingMessageContent reads a
# message's content with `new String(bytes)`, i.e. in the JVM's default
# charset, which Java 17 takes from the locale (US-ASCII without LANG, so
# every non-ASCII byte would become U+FFFD); pgoutput's content is the
# database's bytes, UTF-8 here.
WORKER_JAVA_OPTS=("${HEAP_OPTS[@]}" -XX:+ExitOnOutOfMemoryError -Xlog:cds=off
    -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true -Dfile.encoding=UTF-8)

usage() {
    sed -n '7,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

require_java() {
    command -v java >/dev/null 2>&1 ||
        die "java not found: install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)"
}

# The stamp records what was resolved, so a version bump here refetches.
stamp_text() {
    printf 'debezium-connector-postgres=%s connect-runtime=%s log4j-slf4j-impl=%s plugin-layout=2\n' \
        "$DEBEZIUM_VERSION" "$CONNECT_VERSION" "$LOG4J_VERSION"
}

libs_complete() {
    [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(stamp_text)" ]]
}

# The worker's own classpath: the Connect runtime, JsonConverter and a log4j2
# binding. Nothing of Debezium's, which lives in its plugin directory.
write_connect_pom() {
    cat >"$1" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>walrelay.test</groupId>
  <artifactId>connect-runtime-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-runtime</artifactId>
      <version>$CONNECT_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-json</artifactId>
      <version>$CONNECT_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
}

# The plugin directory, laid out like Debezium's own plugin archive: the
# connector, debezium-connect-plugins (EventRouter, BinaryDataConverter) and
# their libraries. Kafka's jars and slf4j are excluded: Connect loads
# org.apache.kafka.* and org.slf4j.* from the worker's classpath regardless,
# and duplicates in a plugin directory only invite version confusion.
# Jackson is excluded as Debezium's plugin archive leaves it out: the
# worker's Jackson serves the plugin, and a second copy in the plugin
# directory keeps Debezium's CloudEventsConverter from loading (its static
# initialiser looks up JsonConverter's convertToConnect by the plugin's
# JsonNode class, which then is not the worker's).
write_plugin_pom() {
    cat >"$1" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>walrelay.test</groupId>
  <artifactId>debezium-plugin-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.debezium</groupId>
      <artifactId>debezium-connector-postgres</artifactId>
      <version>$DEBEZIUM_VERSION</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>com.fasterxml.jackson.core</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>com.fasterxml.jackson.datatype</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
}

# Resolves POM's runtime dependencies into OUT; logs to LOG.
mvn_copy() {
    local pom_dir=$1 out=$2 log=$3
    (cd "$pom_dir" && mvn -q -B "$DEPENDENCY_PLUGIN:copy-dependencies" \
        -DincludeScope=runtime -DoutputDirectory="$out") >"$log" 2>&1
}

cmd_fetch() {
    require_java
    libs_complete && return 0
    mkdir -p "$CACHE_DIR"
    # Parallel test processes may call fetch at once: one resolves, the others wait.
    exec 9>"$CACHE_DIR/.lock"
    flock 9
    if libs_complete; then
        exec 9>&-
        return 0
    fi
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found: install Maven 3.8+ (Debian: apt-get install maven); it resolves Debezium $DEBEZIUM_VERSION from Maven Central once"
    local work
    work=$(mktemp -d "$CACHE_DIR/fetch.XXXXXX")
    mkdir -p "$work/connect-pom" "$work/plugin-pom"
    write_connect_pom "$work/connect-pom/pom.xml"
    write_plugin_pom "$work/plugin-pom/pom.xml"
    note "resolving Kafka Connect $CONNECT_VERSION and Debezium $DEBEZIUM_VERSION from Maven Central (first run only)"
    if ! mvn_copy "$work/connect-pom" "$work/connect" "$work/connect-mvn.log"; then
        tail -n 40 "$work/connect-mvn.log" >&2
        rm -rf "$work"
        die "mvn could not resolve Kafka Connect $CONNECT_VERSION (log above)"
    fi
    if ! mvn_copy "$work/plugin-pom" "$work/plugin" "$work/plugin-mvn.log"; then
        tail -n 40 "$work/plugin-mvn.log" >&2
        rm -rf "$work"
        die "mvn could not resolve Debezium $DEBEZIUM_VERSION (log above)"
    fi
    local jar
    for jar in connect/connect-runtime-"$CONNECT_VERSION".jar connect/connect-json-"$CONNECT_VERSION".jar \
        plugin/debezium-connector-postgres-"$DEBEZIUM_VERSION".jar \
        plugin/debezium-connect-plugins-"$DEBEZIUM_VERSION".jar; do
        [[ -f "$work/$jar" ]] || die "mvn finished but $jar is missing in $work"
    done
    rm -rf "$CONNECT_LIBS" "$PLUGIN_PATH"
    mv "$work/connect" "$CONNECT_LIBS"
    mkdir -p "$PLUGIN_PATH"
    mv "$work/plugin" "$PLUGIN_LIBS"
    rm -rf "$work"
    stamp_text >"$STAMP"
    exec 9>&-
}

# Prints the pid of DIR's worker if it is alive and really ours.
running_pid() {
    local dir=$1 pid
    [[ -f "$dir/pid" ]] || return 1
    pid=$(cat "$dir/pid")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid must not be mistaken for the worker.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/worker.properties" || return 1
    printf '%s\n' "$pid"
}

# True if the properties FILE sets KEY (a Java properties file: '=' or ':').
sets_key() {
    local file=$1 key=$2
    grep -qE "^[[:space:]]*${key//./\\.}[[:space:]]*[=:]" "$file"
}

# MODE is standalone or distributed.
write_worker_config() {
    local mode=$1 dir=$2 worker=$3 rest_port=$4
    {
        cat "$worker"
        printf '\n# --- added by scripts/debezium.sh (the last value of a key wins) ---\n'
        [[ "$mode" != standalone ]] || printf 'offset.storage.file.filename=%s/offsets\n' "$dir"
        # Workers always serve REST; 8083 would clash between runs.
        printf 'listeners=http://127.0.0.1:%s\n' "$rest_port"
        if [[ "$mode" == distributed ]]; then
            # The URL other workers forward requests to (the leader's) and the
            # one in the group's metadata; the default is the host's name.
            printf 'rest.advertised.host.name=127.0.0.1\n'
            printf 'rest.advertised.port=%s\n' "$rest_port"
        fi
        sets_key "$worker" plugin.path || printf 'plugin.path=%s\n' "$PLUGIN_PATH"
        sets_key "$worker" plugin.discovery || printf 'plugin.discovery=service_load\n'
        sets_key "$worker" offset.flush.interval.ms ||
            printf 'offset.flush.interval.ms=%s\n' "$OFFSET_FLUSH_MS"
    } >"$dir/worker.properties"
    cat >"$dir/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="stdout" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %X{connector.context}%m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="org.reflections" level="error"/>
    <Logger name="org.apache.kafka.clients.consumer.ConsumerConfig" level="warn"/>
    <Logger name="org.apache.kafka.clients.admin.AdminClientConfig" level="warn"/>
    <Root level="info">
      <AppenderRef ref="stdout"/>
    </Root>
  </Loggers>
</Configuration>
EOF
}

# Every start logs an ERROR about CloudEventsConverter (Debezium looks up a
# JsonConverter method Kafka no longer has); it is noise unless that converter
# is configured, so the error summary leaves it out.
KNOWN_NOISE='CloudEventsConverter|convertToConnect|Failed to discover Converter|ExceptionInInitializerError|ServiceConfigurationError'

# The errors and exceptions this start logged, then the last lines.
log_tail() {
    local dir=$1 offset
    offset=$(cat "$dir/log_offset" 2>/dev/null || echo 0)
    printf -- '--- errors logged since the start (%s/log) ---\n' "$dir" >&2
    tail -c +"$((offset + 1))" "$dir/log" 2>/dev/null |
        grep -E '\] ERROR |^([a-z0-9_$]+\.)+[A-Za-z0-9_$]*(Exception|Error): |^Caused by: ' |
        grep -vE "$KNOWN_NOISE" | head -n 20 >&2 || true
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

# Starts the worker of MODE (standalone or distributed) in DIR; for
# standalone, the remaining arguments are connector files.
start_worker() {
    local mode=$1 dir worker connector rest_port pid main_class
    local -a connectors=()
    dir=$(abs_path "$2")
    worker=$(abs_path "$3")
    shift 3
    [[ -f "$worker" ]] || die "worker file $worker does not exist"
    for connector in "$@"; do
        connector=$(abs_path "$connector")
        [[ -f "$connector" ]] || die "connector file $connector does not exist"
        case "$connector" in
            *.properties | *.json) ;;
            *) die "connector file $connector must end in .properties or .json" ;;
        esac
        connectors+=("$connector")
    done
    case "$mode" in
        standalone) main_class=org.apache.kafka.connect.cli.ConnectStandalone ;;
        distributed) main_class=org.apache.kafka.connect.cli.ConnectDistributed ;;
        *) die "unknown worker mode $mode" ;;
    esac
    mkdir -p "$dir"
    [[ "$worker" != "$dir/worker.properties" ]] ||
        die "$worker is the file this script writes; keep the worker file outside $dir or rename it"
    if pid=$(running_pid "$dir"); then
        die "a worker already runs in $dir (pid $pid): stop it first"
    fi
    cmd_fetch
    rest_port=$(free_port)
    write_worker_config "$mode" "$dir" "$worker" "$rest_port"
    printf '%s\n' "$rest_port" >"$dir/rest_port"
    : >>"$dir/log"
    # wait-streaming only looks at what this start logged.
    stat -c %s "$dir/log" >"$dir/log_offset"
    printf '=== start %s %s ===\n' "$mode" "$(date -u +%FT%TZ)" >>"$dir/log"
    # SIGHUP ignored: the worker outlives the terminal that started it.
    (
        trap '' HUP
        exec java "${WORKER_JAVA_OPTS[@]}" -Dlog4j2.configurationFile="$dir/log4j2.xml" \
            -cp "$CONNECT_LIBS/*" "$main_class" "$dir/worker.properties" "${connectors[@]}"
    ) </dev/null >>"$dir/log" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$dir/pid"
    # Until the subshell has exec'd java, running_pid cannot recognise it.
    local i
    for ((i = 0; i < 100; i++)); do
        running_pid "$dir" >/dev/null && break
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/pid"
            log_tail "$dir"
            die "the worker in $dir exited at once"
        fi
        sleep 0.05
    done
    start_watchdog "kill -0 $pid" "'$SCRIPT_DIR/debezium.sh' stop '$dir'"
    [[ "$mode" != distributed ]] || wait_rest "$dir" "$pid" "$rest_port"
}

# Waits until the worker PID in DIR answers GET / on PORT. A distributed
# worker opens its REST listener only after it has read its storage topics,
# so a broker that is down shows up here (as a timeout), not at once.
wait_rest() {
    local dir=$1 pid=$2 port=$3 deadline
    command -v curl >/dev/null 2>&1 || die "curl not found: install curl"
    deadline=$((SECONDS + START_TIMEOUT))
    until curl -fs -o /dev/null --max-time 5 "http://127.0.0.1:$port/"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/pid"
            log_tail "$dir"
            die "the worker in $dir exited before its REST API answered"
        fi
        if ((SECONDS >= deadline)); then
            log_tail "$dir"
            # A half-started worker would hold its group and port.
            cmd_stop "$dir"
            die "the worker in $dir did not answer GET / on port $port within ${START_TIMEOUT}s (stopped it)"
        fi
        sleep 0.2
    done
}

cmd_stop() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_exit "$pid" "$STOP_TIMEOUT"; then
            # Seen once in a few stops: Jetty's shutdown hook and Connect's
            # race and the JVM hangs after "Kafka Connect stopped" or before.
            # A thread dump in DIR/log (SIGQUIT) tells which.
            note "worker $pid did not stop within ${STOP_TIMEOUT}s, thread dump in $dir/log, sending SIGKILL"
            kill -QUIT "$pid" 2>/dev/null || true
            sleep 1
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 10 || die "worker $pid survived SIGKILL"
        fi
    fi
    rm -f "$dir/pid"
}

cmd_kill() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -KILL "$pid" 2>/dev/null || true
        wait_exit "$pid" 10 || die "worker $pid survived SIGKILL"
    fi
    rm -f "$dir/pid"
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

# Lines a failed connector or task leaves in the log. Connect keeps the JVM up
# when they fail, so waiting for the slot alone would only time out.
FAILURE_PATTERN='will not recover until manually restarted|Failed to start connector|Failed to create connector|Stopping after connector error|ERROR Stopping due to error'

STREAMING_LINE='Processing messages (io.debezium.connector.postgresql.PostgresStreamingChangeEventSource)'

cmd_wait_streaming() {
    local dir=$1 slot=$2 pgurl=$3 pid offset active deadline psql_bin
    dir=$(abs_path "$dir")
    [[ "$slot" =~ ^[a-z0-9_]+$ ]] || die "slot name '$slot' is not a PostgreSQL slot name"
    psql_bin=$(command -v psql) || die "psql not found: install postgresql-client"
    offset=$(cat "$dir/log_offset" 2>/dev/null || echo 0)
    deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        if ! pid=$(running_pid "$dir"); then
            log_tail "$dir"
            die "the worker in $dir is not running"
        fi
        if tail -c +"$((offset + 1))" "$dir/log" | grep -qE "$FAILURE_PATTERN"; then
            log_tail "$dir"
            die "the connector in $dir failed before slot $slot became active (worker $pid still runs)"
        fi
        active=$("$psql_bin" -X -q -At -d "$pgurl" \
            -c "select active from pg_replication_slots where slot_name = '$slot'" 2>/dev/null || true)
        # A slot is already active while CREATE_REPLICATION_SLOT waits for a
        # consistent point (for as long as other transactions on the cluster
        # run), and changes committed before that point are never decoded.
        # Debezium logs "Processing messages" once START_REPLICATION is out.
        if [[ "$active" == t ]] &&
            tail -c +"$((offset + 1))" "$dir/log" | grep -qF "$STREAMING_LINE"; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            log_tail "$dir"
            die "slot $slot was not streaming within ${START_TIMEOUT}s (slot active: '${active:-absent}')"
        fi
        sleep 0.2
    done
}

main() {
    local cmd=${1:-}
    [[ -n "$cmd" ]] || usage
    shift
    case "$cmd" in
        fetch)
            (($# == 0)) || usage
            cmd_fetch
            ;;
        classpath)
            (($# == 0)) || usage
            cmd_fetch
            printf 'classpath=%s/*\nplugin.path=%s\n' "$CONNECT_LIBS" "$PLUGIN_PATH"
            ;;
        standalone)
            (($# >= 2)) || usage
            start_worker standalone "$@"
            ;;
        distributed)
            (($# == 2)) || usage
            start_worker distributed "$@"
            ;;
        stop | kill | status)
            (($# == 1)) || usage
            "cmd_$cmd" "$1"
            ;;
        wait-streaming)
            (($# == 3)) || usage
            cmd_wait_streaming "$@"
            ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"

#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft, broker+controller in one JVM) for
# tests, demo and benchmarks. The jars come from Maven Central through mvn and
# are cached under .cache/kafka/<version>/libs at the repository root.
#
# Usage:
#   kafka.sh fetch                resolve the jars once (offline afterwards)
#   kafka.sh start DIR [PORT]     format DIR once, start the broker, wait until
#                                 it answers admin requests; writes DIR/port
#   kafka.sh stop DIR             SIGTERM, up to 30 s, then SIGKILL
#   kafka.sh kill DIR             SIGKILL (fault tests)
#   kafka.sh restart DIR          stop, then start on the same ports
#   kafka.sh rm DIR               stop and delete DIR
#   kafka.sh status DIR           prints "running PORT" (exit 0) or "stopped" (exit 3)
#   kafka.sh bootstrap DIR        prints 127.0.0.1:PORT (or DIR/host's address)
#   kafka.sh topics DIR ARGS...   runs kafka-topics (TopicCommand) against DIR's broker
#   kafka.sh configs DIR ARGS...  runs kafka-configs (ConfigCommand): quotas, topic configs
#
# DIR layout: server.properties, log4j2.xml, data/ (log.dirs), log (stdout of
# the JVM), pid, port, controller_port.
# WALRELAY_KAFKA_SCRAM=<user>:<password> in the environment of the first
# `start` of DIR adds a SASL_PLAINTEXT listener (SCRAM-SHA-256, SCRAM-SHA-512
# and PLAIN) for that user; its port is in DIR/sasl_port, the credentials are
# kept in DIR/scram. The PLAINTEXT listener stays (tools and test consumers).
# WALRELAY_KAFKA_TLS=<certdir> (with WALRELAY_KAFKA_SCRAM, first start) adds a
# SASL_SSL listener advertised as localhost:DIR/ssl_port, serving
# certdir/server.crt + server.key (scripts/certs.sh makes them), and an SSL
# listener advertised as localhost:DIR/mtls_port that requires a client
# certificate signed by certdir/ca.crt (same server certificate). Both keep
# their copies of these files in DIR/tls.
# WALRELAY_KAFKA_HOST=<IPv4 address> in the environment of the first `start`
# of DIR puts the PLAINTEXT listener on that address instead of 127.0.0.1
# (the benchmark's network namespaces, benches/net.sh); kept in DIR/host, and
# `bootstrap` prints it.
# WALRELAY_OWNER_PID=<pid> in the environment of `start` makes a watchdog stop
# the broker once that process has exited (used by the Rust test helpers).
# WALRELAY_KAFKA_SESSION_TIMEOUT_MS in the environment of `start` sets
# broker.session.timeout.ms (default 3000: a broker restarted after a SIGKILL
# registers again within seconds). The broker fences itself when its JVM
# cannot heartbeat for that long, so a broker that many clients use at once on
# a loaded machine wants more (scripts/env.sh gives its shared one 30000).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

KAFKA_VERSION=4.1.1
# Kafka 4 logs through slf4j 1.7 to log4j2; the slf4j binding is not a
# dependency of the kafka artifacts, so it is pinned here (same version as the
# log4j-core that kafka pulls in).
LOG4J_VERSION=2.24.3
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
CACHE_DIR=$REPO_ROOT/.cache/kafka/$KAFKA_VERSION
LIBS=$CACHE_DIR/libs
STAMP=$CACHE_DIR/libs.complete
START_TIMEOUT=${WALRELAY_KAFKA_START_TIMEOUT:-90}
SESSION_TIMEOUT_MS=${WALRELAY_KAFKA_SESSION_TIMEOUT_MS:-3000}
[[ "$SESSION_TIMEOUT_MS" =~ ^[0-9]+$ ]] ||
    die "WALRELAY_KAFKA_SESSION_TIMEOUT_MS must be a number of milliseconds, got '$SESSION_TIMEOUT_MS'"
BROKER_JAVA_OPTS=(-Xms256m -Xmx512m -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -Xlog:cds=off
    -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true)
# Command-line tools only need to start fast.
TOOL_JAVA_OPTS=(-Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true)

usage() {
    sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

require_java() {
    command -v java >/dev/null 2>&1 ||
        die "java not found: install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)"
}

# The stamp records what was resolved, so a version bump here refetches.
stamp_text() {
    printf 'kafka_2.13=%s kafka-tools=%s log4j-slf4j-impl=%s\n' \
        "$KAFKA_VERSION" "$KAFKA_VERSION" "$LOG4J_VERSION"
}

libs_complete() {
    [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(stamp_text)" ]]
}

write_pom() {
    local pom=$1
    cat >"$pom" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>walrelay.test</groupId>
  <artifactId>kafka-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <!-- TopicCommand: readiness check and the topics subcommand -->
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
      <exclusions>
        <!-- only needed by the connect plugin tool; keeps jetty/jersey out -->
        <exclusion>
          <groupId>org.apache.kafka</groupId>
          <artifactId>connect-runtime</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
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
        die "mvn not found: install Maven 3.8+ (Debian: apt-get install maven); it resolves Kafka $KAFKA_VERSION from Maven Central once"
    local work
    work=$(mktemp -d "$CACHE_DIR/fetch.XXXXXX")
    write_pom "$work/pom.xml"
    note "resolving Apache Kafka $KAFKA_VERSION from Maven Central (first run only)"
    if ! (cd "$work" && mvn -q -B "$DEPENDENCY_PLUGIN:copy-dependencies" \
        -DincludeScope=runtime -DoutputDirectory="$work/libs") >"$work/mvn.log" 2>&1; then
        tail -n 40 "$work/mvn.log" >&2
        rm -rf "$work"
        die "mvn could not resolve Kafka $KAFKA_VERSION (log above)"
    fi
    [[ -f "$work/libs/kafka_2.13-$KAFKA_VERSION.jar" ]] ||
        die "mvn finished but kafka_2.13-$KAFKA_VERSION.jar is missing in $work/libs"
    rm -rf "$LIBS"
    mv "$work/libs" "$LIBS"
    rm -rf "$work"
    stamp_text >"$STAMP"
    exec 9>&-
}

# Class data sharing: a JVM given an archive of the classes an earlier run
# loaded starts about 2 s sooner here. Archives are a side effect of a first
# run (-XX:ArchiveClassesAtExit) and belong to one java binary.
cds_dir() {
    local java_bin
    java_bin=$(readlink -f "$(command -v java)")
    printf '%s/cds/%s\n' "$CACHE_DIR" \
        "$(printf '%s %s' "$java_bin" "$(stat -c %Y "$java_bin")" | md5sum | cut -c1-12)"
}

# Moves a freshly dumped archive into the cache (atomically: parallel runs
# may do the same).
cds_store() {
    local new=$1 name=$2 dir
    [[ -s "$new" ]] || return 0
    dir=$(cds_dir)
    mkdir -p "$dir"
    if ! { cp "$new" "$dir/$name.$$" && mv -f "$dir/$name.$$" "$dir/$name"; }; then
        rm -f "$dir/$name.$$"
    fi
    rm -f "$new"
}

# Runs a Kafka command-line tool (main class first) for DIR's broker, killed
# after $TOOL_TIMEOUT seconds when that is set.
kafka_java() {
    local dir=$1 main_class=$2 cds jsa new="" rc=0 limit=()
    shift 2
    [[ -z "${TOOL_TIMEOUT:-}" ]] || limit=(timeout "$TOOL_TIMEOUT")
    cds=$(cds_dir)
    jsa="$cds/tool-$main_class.jsa"
    if [[ -s "$jsa" ]]; then
        set -- -XX:SharedArchiveFile="$jsa" "$main_class" "$@"
    else
        mkdir -p "$cds"
        new="$cds/tool-$main_class.jsa.new.$$"
        set -- -XX:ArchiveClassesAtExit="$new" "$main_class" "$@"
    fi
    # -Xlog: JVM warnings (about archives, say) must not mix into tool output.
    "${limit[@]}" java "${TOOL_JAVA_OPTS[@]}" -Xlog:disable -Xlog:all=error:stderr \
        -Dlog4j2.configurationFile="$dir/tools-log4j2.xml" -cp "$LIBS/*" "$@" || rc=$?
    if [[ -n "$new" ]]; then
        if ((rc == 0)) && [[ -s "$new" ]]; then
            mv -f "$new" "$jsa"
        fi
        rm -f "$new"
    fi
    return "$rc"
}

# Prints the pid of DIR's broker if it is alive and really ours.
running_pid() {
    local dir=$1 pid
    [[ -f "$dir/pid" ]] || return 1
    pid=$(cat "$dir/pid")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid must not be mistaken for the broker.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/server.properties" || return 1
    printf '%s\n' "$pid"
}

# The PLAINTEXT listener's address: DIR/host, else 127.0.0.1.
listen_host() {
    if [[ -f "$1/host" ]]; then
        cat "$1/host"
    else
        printf '127.0.0.1\n'
    fi
}

write_config() {
    local dir=$1 port=$2 cport=$3
    local listeners map="PLAINTEXT:PLAINTEXT" sasl_lines="" user pass sport
    listeners="PLAINTEXT://$(listen_host "$dir"):$port"
    local advertised
    if [[ -f "$dir/scram" ]]; then
        IFS=: read -r user pass <"$dir/scram"
        sport=$(cat "$dir/sasl_port")
        listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$sport"
        advertised=$listeners
        map="$map,SASL_PLAINTEXT:SASL_PLAINTEXT"
        local l
        sasl_lines="sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
        for l in sasl_plaintext sasl_ssl; do
            sasl_lines="$sasl_lines
listener.name.$l.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$l.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$l.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user=\"$pass\";"
        done
        if [[ -f "$dir/tls/server.pem" ]]; then
            # A TLS listener on 127.0.0.1, advertised by the name its
            # certificate carries.
            add_tls_listener() {
                listeners="$listeners,$1://127.0.0.1:$2"
                advertised="$advertised,$1://localhost:$2"
                map="$map,$1:$1"
            }
            add_tls_listener SASL_SSL "$(cat "$dir/ssl_port")"
            sasl_lines="$sasl_lines
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$dir/tls/server.pem"
            # Mutual TLS: the client's certificate is its only credential.
            if [[ -f "$dir/tls/ca.pem" ]]; then
                add_tls_listener SSL "$(cat "$dir/mtls_port")"
                sasl_lines="$sasl_lines
listener.name.ssl.ssl.client.auth=required
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=$dir/tls/server.pem
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.truststore.location=$dir/tls/ca.pem"
            fi
        fi
    fi
    (umask 077 && cat >"$dir/server.properties") <<EOF
# Written by scripts/kafka.sh on every start; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=$listeners,CONTROLLER://127.0.0.1:$cport
advertised.listeners=${advertised:-$listeners}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$map,CONTROLLER:PLAINTEXT
$sasl_lines
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
# Tests write records stamped years ago (compatibility cases); time-based
# retention (checked every 5 minutes) would delete them under a reader.
log.retention.ms=-1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
# 50 partitions (the default) make the first consumer group slow to appear.
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# After a SIGKILL the restarted broker cannot register until the controller
# has expired its previous session (9 s by default); 3 s unless
# WALRELAY_KAFKA_SESSION_TIMEOUT_MS says otherwise.
broker.session.timeout.ms=$SESSION_TIMEOUT_MS
broker.heartbeat.interval.ms=500
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
    cat >"$dir/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="stdout" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="warn"/>
    <Logger name="state.change.logger" level="warn"/>
    <Root level="info">
      <AppenderRef ref="stdout"/>
    </Root>
  </Loggers>
</Configuration>
EOF
    cat >"$dir/tools-log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="error">
  <Appenders>
    <Console name="stderr" target="SYSTEM_ERR">
      <PatternLayout pattern="%p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="error">
      <AppenderRef ref="stderr"/>
    </Root>
  </Loggers>
</Configuration>
EOF
}

format_storage() {
    local dir=$1 id
    [[ -f "$dir/data/meta.properties" ]] && return 0
    # A Kafka cluster id is 16 random bytes in URL-safe base64 without padding;
    # one starting with '-' would be read as an option.
    id=-
    while [[ "$id" == -* ]]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    local scram=() user pass
    if [[ -f "$dir/scram" ]]; then
        IFS=: read -r user pass <"$dir/scram"
        scram=(--add-scram "SCRAM-SHA-256=[name=$user,password=$pass]"
            --add-scram "SCRAM-SHA-512=[name=$user,password=$pass]")
    fi
    kafka_java "$dir" kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" \
        "${scram[@]}" >"$dir/format.log" 2>&1 || {
        cat "$dir/format.log" >&2
        die "formatting $dir/data failed"
    }
}

launch() {
    local dir=$1
    : >>"$dir/log"
    printf '=== start %s ===\n' "$(date -u +%FT%TZ)" >>"$dir/log"
    local jsa cds_opt
    jsa="$(cds_dir)/broker.jsa"
    rm -f "$dir/broker.jsa.new"
    if [[ -s "$jsa" ]]; then
        cds_opt=-XX:SharedArchiveFile="$jsa"
    else
        # Dumped when this broker exits cleanly; cmd_stop caches it.
        cds_opt=-XX:ArchiveClassesAtExit="$dir/broker.jsa.new"
    fi
    # SIGHUP ignored: the broker outlives the terminal that started it.
    (
        trap '' HUP
        exec java "${BROKER_JAVA_OPTS[@]}" "$cds_opt" -Dlog4j2.configurationFile="$dir/log4j2.xml" \
            -cp "$LIBS/*" kafka.Kafka "$dir/server.properties"
    ) </dev/null >>"$dir/log" 2>&1 &
    printf '%s\n' "$!" >"$dir/pid"
}

log_tail() {
    local dir=$1
    printf -- '--- last lines of %s/log ---\n' "$dir" >&2
    tail -n 30 "$dir/log" >&2 || true
}

# Waits until the broker answers a metadata/admin request. Returns 1 if the
# process died, 2 on timeout.
wait_ready() {
    local dir=$1 port=$2 pid=$3 deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        kill -0 "$pid" 2>/dev/null || return 1
        if grep -q 'Kafka Server started' "$dir/log" 2>/dev/null; then
            break
        fi
        sleep 0.2
    done
    while ((SECONDS < deadline)); do
        kill -0 "$pid" 2>/dev/null || return 1
        if TOOL_TIMEOUT=30 kafka_java "$dir" org.apache.kafka.tools.TopicCommand \
            --bootstrap-server "$(listen_host "$dir"):$port" --list >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 2
}

wait_exit() {
    local pid=$1 seconds=$2 deadline
    deadline=$((SECONDS + seconds))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

cmd_start() {
    local dir port_arg=${2:-} port cport auto_port auto_cport rc pid
    dir=$(abs_path "$1")
    mkdir -p "$dir"
    if running_pid "$dir" >/dev/null; then
        return 0
    fi
    cmd_fetch
    if [[ -n "${WALRELAY_KAFKA_HOST:-}" && ! -f "$dir/host" ]]; then
        [[ "$WALRELAY_KAFKA_HOST" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
            die "WALRELAY_KAFKA_HOST must be an IPv4 address, got '$WALRELAY_KAFKA_HOST'"
        printf '%s\n' "$WALRELAY_KAFKA_HOST" >"$dir/host"
    fi
    if [[ -n "${WALRELAY_KAFKA_SCRAM:-}" && ! -f "$dir/scram" ]]; then
        [[ "$WALRELAY_KAFKA_SCRAM" =~ ^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$ ]] ||
            die "WALRELAY_KAFKA_SCRAM must be user:password (letters, digits, _ . -)"
        (umask 077 && printf '%s\n' "$WALRELAY_KAFKA_SCRAM" >"$dir/scram")
        if [[ -n "${WALRELAY_KAFKA_TLS:-}" ]]; then
            mkdir -p "$dir/tls"
            (umask 077 && cat "$WALRELAY_KAFKA_TLS/server.key" "$WALRELAY_KAFKA_TLS/server.crt" >"$dir/tls/server.pem") ||
                die "cannot read server.key and server.crt in $WALRELAY_KAFKA_TLS"
            cp "$WALRELAY_KAFKA_TLS/ca.crt" "$dir/tls/ca.pem" ||
                die "cannot read ca.crt in $WALRELAY_KAFKA_TLS"
        fi
    fi
    for _ in 1 2 3; do
        if [[ -f "$dir/scram" && ! -f "$dir/sasl_port" ]]; then
            free_port >"$dir/sasl_port"
        fi
        if [[ -f "$dir/tls/server.pem" && ! -f "$dir/ssl_port" ]]; then
            free_port >"$dir/ssl_port"
        fi
        if [[ -f "$dir/tls/ca.pem" && ! -f "$dir/mtls_port" ]]; then
            free_port >"$dir/mtls_port"
        fi
        # A port we chose may be chosen again on a clash; a given or stored
        # one is the caller's promise, so a clash is an error.
        auto_port=0
        auto_cport=0
        if [[ -n "$port_arg" ]]; then
            port=$port_arg
        elif [[ -f "$dir/port" ]]; then
            port=$(cat "$dir/port")
        else
            port=$(free_port)
            auto_port=1
        fi
        if [[ -f "$dir/controller_port" ]]; then
            cport=$(cat "$dir/controller_port")
        else
            cport=$(free_port)
            auto_cport=1
        fi
        if [[ "$cport" == "$port" ]]; then
            ((auto_cport)) || die "broker and controller port of $dir are both $port"
            continue
        fi
        if port_in_use "$port"; then
            ((auto_port)) || die "port $port (of $dir) is in use by another process"
            continue
        fi
        if port_in_use "$cport"; then
            ((auto_cport)) || die "controller port $cport (of $dir) is in use by another process"
            continue
        fi
        printf '%s\n' "$port" >"$dir/port"
        printf '%s\n' "$cport" >"$dir/controller_port"
        write_config "$dir" "$port" "$cport"
        format_storage "$dir"
        launch "$dir"
        pid=$(cat "$dir/pid")
        # Interrupted while waiting: do not leave a half-started broker behind.
        trap 'kill -KILL "$pid" 2>/dev/null; rm -f "$dir/pid"; exit 130' INT TERM
        rc=0
        wait_ready "$dir" "$port" "$pid" || rc=$?
        trap - INT TERM
        if ((rc == 0)); then
            start_watchdog "kill -0 $pid" "'$SCRIPT_DIR/kafka.sh' stop '$dir'"
            return 0
        fi
        if ((rc == 1 && (auto_port || auto_cport))) &&
            tail -n 100 "$dir/log" | grep -q 'Address already in use'; then
            # Another process took a freshly chosen port meanwhile: choose again.
            ((auto_port)) && rm -f "$dir/port"
            ((auto_cport)) && rm -f "$dir/controller_port"
            rm -f "$dir/pid" "$dir/sasl_port" "$dir/ssl_port" "$dir/mtls_port"
            continue
        fi
        if ((rc == 2)); then
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 10 || true
            rm -f "$dir/pid"
            log_tail "$dir"
            die "broker in $dir did not accept requests on $(listen_host "$dir"):$port within ${START_TIMEOUT}s"
        fi
        rm -f "$dir/pid"
        log_tail "$dir"
        die "broker in $dir exited during start"
    done
    die "could not find free ports for the broker in $dir"
}

cmd_stop() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -TERM "$pid" 2>/dev/null || true
        if wait_exit "$pid" 30; then
            cds_store "$dir/broker.jsa.new" broker.jsa
        else
            note "broker $pid did not stop within 30s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            wait_exit "$pid" 10 || die "broker $pid survived SIGKILL"
        fi
    fi
    rm -f "$dir/pid" "$dir/broker.jsa.new"
}

cmd_kill() {
    local dir pid
    dir=$(abs_path "$1")
    if pid=$(running_pid "$dir"); then
        kill -KILL "$pid" 2>/dev/null || true
        wait_exit "$pid" 10 || die "broker $pid survived SIGKILL"
    fi
    rm -f "$dir/pid"
}

cmd_status() {
    local dir
    dir=$(abs_path "$1")
    if running_pid "$dir" >/dev/null; then
        printf 'running %s\n' "$(cat "$dir/port")"
    else
        printf 'stopped\n'
        return 3
    fi
}

cmd_topics() {
    local dir
    dir=$(abs_path "$1")
    shift
    running_pid "$dir" >/dev/null || die "no broker running in $dir"
    kafka_java "$dir" org.apache.kafka.tools.TopicCommand \
        --bootstrap-server "$(listen_host "$dir"):$(cat "$dir/port")" "$@"
}

cmd_configs() {
    local dir
    dir=$(abs_path "$1")
    shift
    running_pid "$dir" >/dev/null || die "no broker running in $dir"
    kafka_java "$dir" kafka.admin.ConfigCommand \
        --bootstrap-server "$(listen_host "$dir"):$(cat "$dir/port")" "$@"
}

main() {
    local cmd=${1:-}
    [[ -n "$cmd" ]] || usage
    shift
    case "$cmd" in
        fetch) cmd_fetch ;;
        start)
            (($# >= 1 && $# <= 2)) || usage
            cmd_start "$@"
            ;;
        stop | kill | rm | status | restart | bootstrap)
            (($# == 1)) || usage
            case "$cmd" in
                stop) cmd_stop "$1" ;;
                kill) cmd_kill "$1" ;;
                rm)
                    cmd_stop "$1"
                    rm -rf "$(abs_path "$1")"
                    ;;
                status) cmd_status "$1" ;;
                restart)
                    cmd_stop "$1"
                    cmd_start "$1"
                    ;;
                bootstrap)
                    [[ -f "$1/port" ]] || die "no broker configured in $1"
                    printf '%s:%s\n' "$(listen_host "$1")" "$(cat "$1/port")"
                    ;;
            esac
            ;;
        topics)
            (($# >= 1)) || usage
            cmd_topics "$@"
            ;;
        configs)
            (($# >= 1)) || usage
            cmd_configs "$@"
            ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"

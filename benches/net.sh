#!/usr/bin/env bash
# The benchmark's network: network namespaces of its own, so that PostgreSQL,
# Kafka and the systems under test talk across links with a round-trip time
# instead of over the host's loopback. Needs root (ip netns, iptables, tc).
#
# The delay is benches/link_delay.rs, a netfilter queue, not tc netem: this
# machine's kernel has no sch_netem (nor fq, nor any qdisc that delays). In
# the servers' namespaces (pg, kafka) an iptables rule (NFQUEUE) queues what
# leaves the veth, and link_delay (real-time priority, chrt -f) lets each
# packet go once it has waited the whole round trip; the relay's host sends
# without delay. TCP sees the same round trip as with half each way, and
# the relay's acknowledgements and status updates, the most packets, cost
# the delay elements nothing.
#
# Usage:
#   benches/net.sh up NAME COND [CC [RATE]]
#       COND loopback: one namespace NAME-lo where everything runs on its own
#                      loopback (no delay), under congestion control CC
#       COND lan:      0.2 ms round trip between the hosts below
#       COND zone:     1 ms round trip
#       lan and zone:  namespaces NAME-pg (PostgreSQL), NAME-kafka (Kafka)
#                      and NAME-relay (the systems under test, the driver,
#                      pgbench), each with one veth to a bridge in NAME-sw;
#                      what the servers' hosts send waits the round trip
#       CC             the TCP congestion control in every namespace (cubic,
#                      bbr, reno; default: the host's)
#       RATE           a bandwidth cap on every host's veth (tc tbf, e.g.
#                      10gbit; default none)
#       lan and zone need LINK_DELAY=<the link_delay binary> (benches/run.sh
#       builds it: cargo build --release --bench link_delay).
#       Writes the network's description to .walrelay-env/bench/net/NAME.env.
#   benches/net.sh down NAME      stops every process left in NAME's
#                                 namespaces and deletes them (no error when
#                                 there are none)
#   benches/net.sh watch NAME PID deletes NAME's namespaces once PID has
#                                 exited (a detached watchdog: a killed
#                                 benchmark leaves no namespace behind)
#   benches/net.sh describe NAME  prints, per namespace, its congestion
#                                 control, its veth's (or loopback's) qdisc
#                                 and its delay
#
# Only addresses inside these namespaces are used: 10.231.0.2 (pg),
# 10.231.0.3 (kafka), 10.231.0.4 (relay) on the bridge of NAME-sw.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"

STATE_DIR=$REPO_ROOT/.walrelay-env/bench/net
SUBNET=10.231.0
declare -A HOST_OF=([pg]=$SUBNET.2 [kafka]=$SUBNET.3 [relay]=$SUBNET.4)
# Round trips in microseconds.
declare -A RTT_OF=([loopback]=0 [lan]=200 [zone]=1000)

usage() {
    sed -n '12,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

check_name() {
    # Interface names stay short; the namespace names carry NAME.
    [[ $1 =~ ^[a-z][a-z0-9]{0,11}$ ]] || die "NAME must be 1-12 lower-case letters or digits, got '$1'"
}

namespaces() {
    ip netns list | awk '{print $1}' | grep -E "^$1-(lo|sw|pg|kafka|relay)$" || true
}

cmd_up() {
    local name=$1 cond=$2 cc=${3:-} rate=${4:-} rtt role ns
    check_name "$name"
    [[ -n ${RTT_OF[$cond]+x} ]] || die "COND must be loopback, lan or zone, got '$cond'"
    [[ $(id -u) -eq 0 ]] || die "net.sh needs root (ip netns, iptables, tc)"
    if [[ -z $cc ]]; then
        cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
    fi
    grep -qw -- "$cc" /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null ||
        modprobe "tcp_$cc" 2>/dev/null ||
        die "congestion control '$cc' is not available (available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
    if [[ -n $rate ]]; then
        [[ $cond != loopback ]] || die "a RATE needs COND lan or zone"
        [[ $rate =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || die "RATE must be like 10gbit, got '$rate'"
    fi
    [[ -z $(namespaces "$name") ]] || die "namespaces of $name exist already (benches/net.sh down $name)"
    mkdir -p "$STATE_DIR"
    # A failed start leaves nothing behind.
    trap 'cmd_down "$name" >/dev/null 2>&1 || true' EXIT
    allow_cc "$name" "$cc"
    rtt=${RTT_OF[$cond]}
    if [[ $cond == loopback ]]; then
        ns=$name-lo
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip netns exec "$ns" sysctl -q -w "net.ipv4.tcp_congestion_control=$cc"
        write_env "$name" "$cond" 0 "$cc" "" "$ns" "$ns" "$ns" 127.0.0.1 127.0.0.1
        trap - EXIT
        return 0
    fi
    # A fresh machine lacks it: Debian's package, once.
    command -v iptables-legacy >/dev/null 2>&1 || apt_install iptables iptables
    IPTABLES=$(command -v iptables-legacy || command -v iptables) ||
        die "iptables not found (Debian: iptables)"
    ip netns add "$name-sw"
    ip -n "$name-sw" link set lo up
    ip -n "$name-sw" link add br0 type bridge
    ip -n "$name-sw" link set br0 up
    for role in pg kafka relay; do
        ns=$name-$role
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip -n "$name-sw" link add "v-$role" type veth peer name eth0 netns "$ns"
        ip -n "$name-sw" link set "v-$role" master br0
        ip -n "$name-sw" link set "v-$role" up
        ip -n "$ns" addr add "${HOST_OF[$role]}/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip netns exec "$ns" sysctl -q -w "net.ipv4.tcp_congestion_control=$cc"
        if [[ -n $rate ]]; then
            tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 4mb latency 50ms
        fi
        if [[ $role != relay ]]; then
            start_delay "$ns" 0
            queue_egress "$ns"
        fi
    done
    calibrate "$name" "$rtt"
    write_env "$name" "$cond" "$rtt" "$cc" "$rate" "$name-pg" "$name-kafka" "$name-relay" \
        "${HOST_OF[pg]}" "${HOST_OF[kafka]}"
    trap - EXIT
}

# STATE_DIR/NAME.env, what benches/walbench/net.py reads: the condition, the
# round trip asked, the congestion control, the bandwidth cap, the three
# roles' namespaces and the servers' addresses; after a calibration also
# the round trip with no delay (BASE), the hold (HOLD) and the round trip
# measured with it (MEASURED).
write_env() {
    local name=$1
    cat >"$STATE_DIR/$name.env" <<EOF
COND=$2
RTT_US=$3
CC=$4
RATE=$5
PG_NS=$6
KAFKA_NS=$7
RELAY_NS=$8
PG_HOST=$9
KAFKA_HOST=${10}
BASE_RTT_US=${BASE:-}
DELAY_US=${HOLD:-}
MEASURED_RTT_US=${MEASURED:-}
EOF
}

# A namespace other than the host's may only pick a congestion control the
# host allows (net.ipv4.tcp_allowed_congestion_control; Debian's kernel
# here allows reno and bbr). When CC is not among them it is added for the
# run, and `down` restores the host's list (kept in STATE_DIR/NAME.allowed_cc).
allow_cc() {
    local name=$1 cc=$2 allowed
    allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
    if [[ " $allowed " == *" $cc "* ]]; then
        return 0
    fi
    printf '%s\n' "$allowed" >"$STATE_DIR/$name.allowed_cc"
    sysctl -q -w "net.ipv4.tcp_allowed_congestion_control=$allowed $cc"
    note "$cc added to the host's net.ipv4.tcp_allowed_congestion_control until benches/net.sh down $name"
}

# link_delay in namespace NS holding what leaves its eth0 for HOLD_US
# microseconds (replacing the one running there); returns once it holds
# the queue.
start_delay() {
    local ns=$1 hold_us=$2 log pid i
    log=$STATE_DIR/$ns.link.log
    [[ -x ${LINK_DELAY:-} ]] || die "LINK_DELAY must name the link_delay binary (cargo build --release --bench link_delay)"
    if [[ -f $STATE_DIR/$ns.link.pid ]]; then
        kill "$(cat "$STATE_DIR/$ns.link.pid")" 2>/dev/null || true
        sleep 0.1
    fi
    ip netns exec "$ns" setsid chrt -f 50 "$LINK_DELAY" 0 "$hold_us" </dev/null >"$log" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$STATE_DIR/$ns.link.pid"
    for ((i = 0; i < 100; i++)); do
        grep -qsx ready "$log" && break
        kill -0 "$pid" 2>/dev/null || die "link_delay in $ns failed: $(cat "$log")"
        sleep 0.05
    done
    grep -qsx ready "$log" || die "link_delay in $ns did not start within 5 s"
    printf '%s\n' "$hold_us" >"$STATE_DIR/$ns.delay_us"
}

# Sends everything that leaves NS's eth0 through netfilter queue 0. With
# nobody reading the queue the packets are dropped (no --queue-bypass): a
# link without its delay must not pass for one with it. The xtables NFQUEUE
# target: this kernel has it, not nftables' queue expression.
queue_egress() {
    ip netns exec "$1" "$IPTABLES" -t mangle -A POSTROUTING -o eth0 -j NFQUEUE --queue-num 0
}

# The round trip from NAME-relay to NAME-pg in microseconds: the median of
# 51 TCP handshakes (a SYN and its SYN-ACK) to a listener in NAME-pg.
measure_rtt() {
    local name=$1 port=5999 server rtt
    ip netns exec "$name-pg" python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
while True:
    s.accept()[0].close()' "${HOST_OF[pg]}" "$port" &
    server=$!
    rtt=$(ip netns exec "$name-relay" python3 -c '
import socket, statistics, sys, time
for _ in range(100):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()
        break
    except OSError:
        time.sleep(0.05)
times = []
for _ in range(51):
    t = time.perf_counter()
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    times.append(time.perf_counter() - t)
print(round(statistics.median(times) * 1e6))' "${HOST_OF[pg]}" "$port") || rtt=""
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    [[ -n $rtt ]] || die "no round trip measured between $name-relay and $name-pg"
    printf '%s\n' "$rtt"
}

# Sets the servers' hosts' delay so that the round trip NAME's hosts measure
# is RTT_US: the delay elements cost a round trip of their own on this
# machine (about 0.1-0.2 ms with no delay at all), so they hold packets for
# what is left, corrected once by a second measurement. Sets BASE (the
# round trip with no delay), HOLD (the delay given) and MEASURED (the last
# round trip).
calibrate() {
    local name=$1 target=$2 prev role i
    HOLD=0
    BASE=$(measure_rtt "$name")
    MEASURED=$BASE
    for i in 1 2; do
        ((MEASURED < target - 20 || MEASURED > target + 20)) || break
        prev=$HOLD
        HOLD=$((HOLD + target - MEASURED))
        ((HOLD >= 0)) || HOLD=0
        ((HOLD != prev)) || break
        for role in pg kafka; do
            start_delay "$name-$role" "$HOLD"
        done
        MEASURED=$(measure_rtt "$name")
    done
    note "$name: round trip ${MEASURED} us (asked ${target}; ${BASE} with no delay; ${HOLD} us held by the servers' hosts)"
}

cmd_down() {
    local name=$1 ns pids i
    check_name "$name"
    for ns in $(namespaces "$name"); do
        for i in 1 2 3 4 5 6 7 8 9 10 11; do
            pids=$(ip netns pids "$ns" 2>/dev/null || true)
            [[ -n $pids ]] || break
            if ((i <= 10)); then
                # shellcheck disable=SC2086 # one pid per word
                kill -TERM $pids 2>/dev/null || true
                sleep 0.5
            else
                # shellcheck disable=SC2086
                kill -KILL $pids 2>/dev/null || true
                sleep 0.2
            fi
        done
        ip netns del "$ns"
        rm -f "$STATE_DIR/$ns".{delay_us,link.pid,link.log}
    done
    rm -f "$STATE_DIR/$name.env"
    if [[ -f $STATE_DIR/$name.allowed_cc ]]; then
        sysctl -q -w "net.ipv4.tcp_allowed_congestion_control=$(cat "$STATE_DIR/$name.allowed_cc")"
        rm -f "$STATE_DIR/$name.allowed_cc"
    fi
}

cmd_watch() {
    local name=$1 pid=$2
    check_name "$name"
    WALRELAY_OWNER_PID=$pid start_watchdog true "'$SCRIPT_DIR/net.sh' down '$name'"
}

cmd_describe() {
    local name=$1 ns dev
    check_name "$name"
    for ns in $(namespaces "$name"); do
        [[ $ns == "$name-sw" ]] && continue
        dev=eth0
        [[ $ns == "$name-lo" ]] && dev=lo
        printf '%s: cc %s; %s qdisc %s; delay %s\n' "$ns" \
            "$(ip netns exec "$ns" cat /proc/sys/net/ipv4/tcp_congestion_control)" "$dev" \
            "$(tc -n "$ns" qdisc show dev "$dev" | head -n 1 | sed 's/ *$//')" \
            "$(if [[ -f $STATE_DIR/$ns.delay_us ]]; then
                printf '%s us on egress (link_delay, netfilter queue 0)' "$(cat "$STATE_DIR/$ns.delay_us")"
            else
                printf none
            fi)"
    done
}

main() {
    local cmd=${1:-}
    [[ -n $cmd ]] || usage
    shift
    case "$cmd" in
        up)
            (($# >= 2 && $# <= 4)) || usage
            cmd_up "$@"
            ;;
        down)
            (($# == 1)) || usage
            cmd_down "$1"
            ;;
        watch)
            (($# == 2)) || usage
            cmd_watch "$@"
            ;;
        describe)
            (($# == 1)) || usage
            cmd_describe "$1"
            ;;
        *) usage ;;
    esac
}

main "$@"

"""The results as markdown: the tables (drains, the walsender, the two
outbox styles, W3 and its stages, where the CPU went), the targets of
issue 19, the run's header, and the results block of docs/benchmarks.md
between its markers. Formats what the workloads measured; computes
nothing but ratios.
"""

import os

from . import REPO, BenchError
from .cpu_profile import PART_LABELS, PARTS
from .drains import DRAINS
from .env import OTHERS_CPU, PIN_MODES, WALSENDER_CPU
from .schema import MESSAGE_PREFIX
from .stats import QUANTILES
from .systems import TRANSACTIONAL, WALRELAYS, base_system, label
from .walrelay import STAGES, row_key
from .writer import WRITERS


def fmt(v, spec=",.0f", none="–"):
    if v is None:
        return none
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    return format(v, spec)


def drain_table(results):
    # With an exactly-once system or a walrelay variant in the run: its rate
    # against plain walrelay's (at-least-once, --walrelay) of the same run.
    eos = any(base_system(r["system"]) in WALRELAYS and r["system"] != "walrelay" for r in results)
    lines = ["| workload | system | events | seconds | events/s | every round, events/s | vs ceiling | vs walsender | "
             + ("vs walrelay | " if eos else "") +
             "vs Debezium tuned | CPU s / 1M events | walsender CPU s / 1M | broker CPU s / 1M | peak RSS MB | "
             "start-up s: streaming / first record |",
             "|---|---|--:|--:|--:|--:|--:|--:|" + ("--:|" if eos else "") + "--:|--:|--:|--:|--:|--:|"]
    by = {}
    for r in results:
        by[(r["workload"], r["system"])] = r
    for r in results:
        if r["workload"] not in DRAINS:
            continue
        if "error" in r:
            lines.append(f"| {r['workload']} | {label(r['system'])} | {r['events']:,} | failed: {r['error']} |"
                         " | | | | | | | | | |" + (" |" if eos else ""))
            continue
        ceil = by.get((r["workload"], "ceiling"), {}).get("events_per_s")
        wals = by.get((r["workload"], "walsender"), {}).get("events_per_s")
        dbz = by.get((r["workload"], "dbz_tuned"), {}).get("events_per_s")
        alo = by.get((r["workload"], "walrelay"), {}).get("events_per_s")
        rate = r["events_per_s"]
        vs_alo = f"{fmt(rate / alo if alo else None, '.2f')} | " if eos else ""
        lines.append(
            f"| {r['workload']} | {label(r['system'])} | {r['events']:,} | {r['seconds']:.2f} | {fmt(rate)} | "
            f"{' / '.join(fmt(x) for x in r.get('rounds', [])) or '1 round'} | "
            f"{fmt(rate / ceil if ceil else None, '.2f')} | {fmt(rate / wals if wals else None, '.2f')} | {vs_alo}"
            f"{fmt(rate / dbz if dbz else None, '.2f')} | "
            f"{fmt(r['cpu_s_per_m'], '.1f')} | {fmt(r.get('walsender_cpu_s_per_m'), '.1f')} | "
            f"{fmt(r.get('broker_cpu_s_per_m'), '.1f')} | {fmt(r['peak_rss_mb'], '.1f')} | "
            f"{fmt(r.get('startup_s'), '.2f')} / {fmt(r.get('first_record_s'), '.2f')} |")
    return "\n".join(lines)


def walsender_table(results):
    """The walsender's time while each system drained: on a CPU, waiting
    for one, blocked; its context switches per 1,000 events."""
    lines = ["| workload | system | events/s | walsender CPU s / 1M | on CPU % | waiting for a CPU % | blocked % | "
             "switches per 1,000 events: voluntary / involuntary | bytes per TCP segment it sent |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in results:
        if r["workload"] not in DRAINS or "error" in r:
            continue
        ws = r.get("walsender_sched") or {}
        lines.append(
            f"| {r['workload']} | {label(r['system'])} | {fmt(r['events_per_s'])} | "
            f"{fmt(r.get('walsender_cpu_s_per_m'), '.1f')} | {fmt(ws.get('on_cpu_pct'), '.0f')} | "
            f"{fmt(ws.get('wait_pct'), '.0f')} | {fmt(ws.get('blocked_pct'), '.0f')} | "
            f"{fmt(ws.get('vol_cs_per_k'), ',.1f')} / {fmt(ws.get('invol_cs_per_k'), ',.1f')} | "
            f"{fmt(ws.get('bytes_per_segment'), ',.0f')} |")
    return "\n".join(lines)


WALSENDER_NOTE = ("The walsender (the slot's `active_pid`) from the drain's start to its end: its time on a CPU and "
                  "waiting on a run queue from `/proc/<pid>/schedstat`, blocked the rest (asleep on its socket, a "
                  "latch or I/O), as shares of that wall time; its context switches from `/proc/<pid>/status` "
                  "(voluntary: it blocked; involuntary: it was preempted). –: the kernel keeps no schedstat. "
                  "Bytes per TCP segment: what its socket sent over the segments it sent (`ss -tie`, every "
                  "0.5 s), about one pgoutput message when each send() leaves on its own.")


def w3_table(results):
    # With an exactly-once system: its latencies are to visibility for a
    # read_committed consumer (the COMMIT marker); its append latencies
    # (what a read_uncommitted consumer sees) go in a column of their own.
    eos = any(base_system(r["system"]) in TRANSACTIONAL for r in results if r["workload"] == "W3")
    lines = ["| system | load | target events/s | achieved events/s | p50 ms | p99 ms | p99.9 ms | max ms | "
             + ("append p50 / p99 / p99.9 ms | " if eos else "") +
             "latencies | max slot lag MiB | lag bounded | catch-up s | CPU s / 1M events | peak RSS MB |",
             "|---|--:|--:|--:|--:|--:|--:|--:|" + ("--:|" if eos else "") + "--:|--:|--:|--:|--:|--:|"]
    for r in results:
        if r["workload"] != "W3":
            continue
        if "error" in r:
            lines.append(f"| {label(r['system'])} | failed: {r['error']} | | | | | | | | | | | | |"
                         + (" |" if eos else ""))
            continue
        append = ""
        if eos:
            append = (" / ".join(fmt(r.get(k), ".1f") for k in ("append_p50_ms", "append_p99_ms", "append_p999_ms"))
                      if "append_p50_ms" in r else "same") + " | "
        lines.append(
            f"| {label(r['system'])} | {r['level_pct']} % | {fmt(r['target_rate'])} | {fmt(r['achieved_rate'])} | "
            f"{fmt(r.get('p50_ms'), '.1f')} | {fmt(r.get('p99_ms'), '.1f')} | {fmt(r.get('p999_ms'), '.1f')} | "
            f"{fmt(r.get('max_ms'), '.1f')} | {append}{fmt(r.get('latency_n'))} | {fmt(r['max_lag_mib'], '.1f')} | "
            f"{fmt(r['lag_bounded'])} | {fmt(r['catch_up_s'], '.1f')} | {fmt(r.get('cpu_s_per_m'), '.1f')} | "
            f"{fmt(r.get('peak_rss_mb'), '.1f')} |")
    return "\n".join(lines)


def stages_table(results):
    """W3's latency by stage of walrelay next to the exact end-to-end
    percentiles, per system and level."""
    rows = [r for r in results if r["workload"] == "W3" and "error" not in r and base_system(r["system"]) in WALRELAYS]
    if not rows:
        return "No walrelay in W3."
    lines = ["| system | load | stage | observations | p50 ms | p90 ms | p99 ms | p99.9 ms |",
             "|---|--:|---|--:|--:|--:|--:|--:|"]
    what = {row_key(field, stage): text for field, stage, text in STAGES}
    for r in rows:
        head = f"| {label(r['system'])} | {r['level_pct']} % |"
        end = ("visible to read_committed (COMMIT marker's LogAppendTime)" if r.get("visibility", "").startswith(
            "read_committed") else "LogAppendTime")
        lines.append(f"{head} **commit → {end}, exact (end to end)** | {fmt(r.get('latency_n'))} | "
                     + " | ".join(f"**{fmt(r.get(f'{q}_ms'), '.1f')}**" for q, _ in QUANTILES) + " |")
        if not r.get("stages"):
            lines.append(f"{head} no breakdown (this binary's /api/state has no stage_seconds) | | | | | |")
            continue
        for stage, st in r["stages"].items():
            lines.append(f"{head} {what.get(stage, stage)} | {fmt(st['count'])} | "
                         + " | ".join(fmt(st.get(f'{q}_ms'), '.2f') for q, _ in QUANTILES) + " |")
    return "\n".join(lines)


STAGES_NOTE = ("The stages are walrelay's histograms (`walrelay_stage_seconds`, `walrelay_commit_to_ack_seconds`), "
               "read from its `/api/state` before and after each level (until every event of the level was in Kafka) "
               "and subtracted; "
               "their percentiles are interpolated linearly inside a bucket, so they are approximate to the bucket's "
               "width (walrelay's bounds grow geometrically: × √2 per bucket for the stages, × 2 for "
               "commit_to_ack). The end-to-end row is exact (to LogAppendTime's 1 ms). Stages "
               "do not add up to the end to end: each has its own unit (transaction, event, status update).")


def targets(results):
    """The performance targets (issue 19; docs/benchmarks.md), each with the
    measured value, from the unpinned results of plain `walrelay`."""
    by = {(r["workload"], r["system"], r.get("level_pct")): r for r in results
          if "error" not in r and not r.get("pinned")}
    rows = []

    def add(name, ok, detail):
        rows.append(f"| {name} | {'met' if ok else '**not met**' if ok is not None else 'not measured'} | {detail} |")

    for w in ("W1", "W2"):
        wr, ws, d = (by.get((w, s, None)) for s in ("walrelay", "walsender", "dbz_tuned"))
        if wr and ws:
            ratio = wr["events_per_s"] / ws["events_per_s"]
            add(f"{w} >= 0.9 of the walsender reader", ratio >= 0.9, f"{ratio:.2f}")
            a, b = wr.get("walsender_cpu_s_per_m"), ws.get("walsender_cpu_s_per_m")
            if a and b:
                add(f"{w} walsender CPU per event with walrelay <= 1.1x with the reader", a / b <= 1.1,
                    f"{a / b:.2f}x ({a:.1f} vs {b:.1f} s / 1M)")
        else:
            add(f"{w} >= 0.9 of the walsender reader", None, "")
        if wr and d:
            x = wr["events_per_s"] / d["events_per_s"]
            add(f"{w} >= 3.5x tuned Debezium events/s", x >= 3.5, f"{x:.2f}x")
        else:
            add(f"{w} >= 3.5x tuned Debezium events/s", None, "")
    w3 = [r for (wl, sy, lvl), r in by.items() if wl == "W3" and sy == "walrelay" and lvl is not None
          and lvl <= 10 and r.get("p99_ms") is not None]
    if w3:
        r = max(w3, key=lambda r: r["level_pct"])
        add(f"W3 at {r['level_pct']} % of the ceiling: p99 <= 20 ms", r["p99_ms"] <= 20, f"{r['p99_ms']:.1f} ms")
        add(f"W3 at {r['level_pct']} % of the ceiling: p99.9 <= 50 ms", r["p999_ms"] <= 50, f"{r['p999_ms']:.1f} ms")
    else:
        add("W3 at 10 % of the ceiling: p99 <= 20 ms, p99.9 <= 50 ms", None, "")
    rss = [r.get("peak_rss_mb") for r in results if r["system"] == "walrelay" and r["workload"] in ("W1", "W2", "W3")
           and r.get("peak_rss_mb") is not None]
    add("peak RSS <= 48 MB in W1-W3", (max(rss) <= 48) if rss else None, f"{max(rss):.1f} MB" if rss else "")
    w4 = by.get(("W4", "walrelay", None))
    add("peak RSS <= 256 MB in W4", (w4["peak_rss_mb"] <= 256) if w4 else None,
        f"{w4['peak_rss_mb']:.1f} MB" if w4 else "")
    st = [r["startup_s"] for r in results if r["system"] == "walrelay" and r.get("startup_s") is not None]
    add("start-up to streaming < 0.2 s", (max(st) < 0.2) if st else None, f"max {max(st):.2f} s" if st else "")
    return "| target | status | measured |\n|---|---|---|\n" + "\n".join(rows)


def network_line(facts):
    """The run's network: condition, round trip (set and measured), the
    congestion control and, per host, its qdisc and delay."""
    n = facts.get("network") or {}
    measured = n.get("measured_rtt_us")
    hosts = "; ".join(n.get("hosts") or [])
    return (f"Network: {n.get('describe', 'loopback on the host')}"
            + (f", round trip to PostgreSQL measured {measured / 1000:.3f} ms (TCP handshake, median of 21)"
               if measured is not None else "")
            + f"; TCP congestion control {n.get('tcp_congestion_control') or facts.get('tcp_congestion_control', '?')}"
            + (f"; {hosts}" if hosts else "")
            + (f"; the delay elements used {n['link_cpu_s']} CPU seconds in the whole run"
               if n.get("link_cpu_s") is not None else ""))


def report(args, facts, results, command):
    smoke = args.quick
    head = []
    if smoke:
        head.append("> **Smoke run (`--quick`, small sizes): it checks that the tooling works; "
                    "these numbers are not the result.**\n")
    head.append(f"Command: `{command}`  \n"
                f"Date: {facts['date_utc']}, walrelay {facts['walrelay_commit']}"
                f"{' (uncommitted changes)' if facts['worktree_dirty'] else ''}  \n"
                f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, Linux {facts['kernel']}, "
                f"load average at start {facts['load_average_at_start']}  \n"
                f"{network_line(facts)}  \n"
                f"{facts['postgres']}, Kafka 4.1.1 (single KRaft node), {facts['java']}; "
                f"everything co-located on this machine.  \n"
                f"pgoutput options (walrelay's, and the baselines'): "
                f"{', '.join(f'{k}={v}' for k, v in facts['pgoutput_options'].items())}"
                + (f"; W5: {', '.join(f'{k}={v}' for k, v in facts['pgoutput_options_w5'].items())}"
                   if "W5" in args.only.upper().split(",") else "") + "\n")
    only = args.only.upper().split(",")
    parts = {
        "W1": f"W1 {args.w1:,} single-event transactions (insert + delete)",
        "W2": f"W2 {args.w2:,} rows in {args.w2_batch}-row insert-only transactions",
        "W3": f"W3 {', '.join(f'{x} %' for x in args.levels)} of the W1 ceiling for {args.w3_seconds} s each "
              f"after a {args.w3_warmup} s warm-up (pgbench -R, {args.clients} clients, one event per transaction)",
        "W4": f"W4 one transaction of {args.w4:,} rows",
        "W5": f"W5 {args.w5:,} single-event transactions, each one outbox_emit() "
              f"(pg_logical_emit_message(true, '{MESSAGE_PREFIX}', <the event as JSON>)), after the writer's cost "
              f"of both styles ({args.writer_rounds} x {args.writer_seconds} s each, {args.clients} pgbench clients)",
    }
    sizes = ("Sizes: " + "; ".join(v for k, v in parts.items() if k in only) +
             f". Payload: about {args.payload_bytes} bytes of JSON (jsonb).\n")
    gen = getattr(args, "w3_generator_max", None)
    if gen:
        sizes += (f"\nW3's generator, pgbench with {args.clients} clients and no rate limit, committed "
                  f"{gen:,.0f} events/s at most in this run with nothing decoding the WAL: levels above "
                  f"that cannot be offered on this machine.\n")
    pin = {"off": "none, every process on every CPU",
           "on": f"the walsender of the system measured alone on CPU {WALSENDER_CPU}, everything else on "
                 f"CPU {OTHERS_CPU}",
           "both": f"both modes from the same backlogs: unpinned, and the walsender alone on CPU {WALSENDER_CPU} "
                   f"with everything else on CPU {OTHERS_CPU}"}[args.pin]
    sizes += f"\nCPU pinning (`--pin {args.pin}`): {pin}.\n"
    # The targets are stated for the unpinned machine (or the only mode run).
    first = [r for r in results if r.get("pinned", False) == PIN_MODES[args.pin][0]]
    return "\n".join(head) + "\n" + sizes + "\n### Backlog drains (W1, W2, W4, W5)\n\n" + \
        per_mode(results, drain_table) + \
        "\n\n### The walsender while it drained\n\n" + WALSENDER_NOTE + "\n\n" + per_mode(results, walsender_table) + \
        "\n\n### Two outbox styles: table (W1) and messages (W5)\n\n" + styles_table(first) + \
        "\n\n### Steady load (W3)\n\n" + per_mode(results, w3_table) + \
        "\n\n### W3 latency by stage\n\n" + STAGES_NOTE + "\n\n" + per_mode(results, stages_table) + \
        "\n\n### Where the CPU went\n\n" + per_mode(results, cpu_table) + \
        "\n\n### Targets\n\n" + targets(first) + \
        "\n\n![throughput and latency](benchmarks.svg)\n"


def per_mode(results, table):
    """`table` of the results, once per CPU mode when the run had both."""
    modes = sorted({r.get("pinned", False) for r in results})
    if len(modes) < 2:
        return table(results)
    titles = {False: "Unpinned (every process on every CPU):",
              True: f"Pinned (the walsender of the system measured alone on CPU {WALSENDER_CPU}, everything else "
                    f"on CPU {OTHERS_CPU}):"}
    return "\n\n".join(f"{titles[m]}\n\n{table([r for r in results if r.get('pinned', False) == m])}" for m in modes)


def styles_table(results):
    """The writer's cost of each outbox style, and W5's drains next to W1's."""
    writers = {r["system"]: r for r in results if r["workload"] == "writer"}
    w1 = {r["system"]: r for r in results if r["workload"] == "W1" and "error" not in r}
    w5 = {r["system"]: r for r in results if r["workload"] == "W5" and "error" not in r}
    if not writers and not w5:
        return "Not run (W5 not in `--only`)."
    out = []
    ok = {k: v for k, v in writers.items() if "error" not in v}
    if writers:
        base = ok.get("table", {}).get("tps")
        lines = ["| outbox style | each transaction | transactions/s (median) | every round | vs table | "
                 "PostgreSQL CPU µs / transaction | WAL bytes / transaction | VACUUM after the run: s / CPU s |",
                 "|---|---|--:|--:|--:|--:|--:|--:|"]
        for style, (what, _) in WRITERS.items():
            w = writers.get(style)
            if not w:
                continue
            if "error" in w:
                lines.append(f"| {style} | {what} | failed: {w['error']} | | | | | |")
                continue
            lines.append(f"| {style} | {what} | {fmt(w['tps'])} | {' / '.join(fmt(x) for x in w['rounds'])} | "
                         f"{fmt(w['tps'] / base if base else None, '.2f')} | {fmt(w['pg_cpu_us_per_txn'], '.0f')} | "
                         f"{fmt(w['wal_bytes_per_txn'], ',.0f')} | {w['vacuum_s']:.2f} / {w['vacuum_cpu_s']:.2f} |")
        any_w = next(iter(ok.values()), None)
        head = (f"The writer's cost: pgbench without a rate limit, {any_w['clients']} clients, {any_w['seconds']} s "
                f"per run, styles interleaved, nothing decoding the WAL; PostgreSQL's CPU is the whole cluster's "
                f"(backends, WAL writer, checkpointer), autovacuum off for the outbox meanwhile, then one VACUUM "
                f"of the outbox measured on its own.\n\n") if any_w else ""
        out.append(head + "\n".join(lines))
    if w5:
        def per_event(r, key):
            return r.get(key) if r else None

        lines = ["| system | W1 events/s (table) | W5 events/s (messages) | W5 / W1 | CPU s / 1M events: W1 / W5 | "
                 "walsender CPU s / 1M: W1 / W5 | broker CPU s / 1M: W1 / W5 | peak RSS MB: W1 / W5 |",
                 "|---|--:|--:|--:|--:|--:|--:|--:|"]
        for system, b in w5.items():
            a = w1.get(system)
            ra, rb = per_event(a, "events_per_s"), b["events_per_s"]

            def pair(key, spec=".1f"):
                return f"{fmt(per_event(a, key), spec)} / {fmt(b.get(key), spec)}"
            lines.append(f"| {label(system)} | {fmt(ra)} | {fmt(rb)} | {fmt(rb / ra if ra else None, '.2f')} | "
                         f"{pair('cpu_s_per_m')} | {pair('walsender_cpu_s_per_m')} | {pair('broker_cpu_s_per_m')} | "
                         f"{pair('peak_rss_mb')} |")
        facts = []
        any1, any5 = next(iter(w1.values()), None), next(iter(w5.values()))
        if any1:
            facts.append(f"WAL per event in the backlog: W1 {any1['backlog_mib'] * 2**20 / any1['events']:,.0f} bytes, "
                         f"W5 {any5['backlog_mib'] * 2**20 / any5['events']:,.0f} bytes")
        ws1, ws5 = w1.get("walsender", {}), w5.get("walsender", {})
        if ws5.get("walsender_messages_per_event") is not None:
            facts.append(f"pgoutput messages the walsender sent per event (walsender reader): W1 "
                         f"{fmt(ws1.get('walsender_messages_per_event'), '.2f')}, W5 "
                         f"{fmt(ws5.get('walsender_messages_per_event'), '.2f')}; pgoutput bytes per event: W1 "
                         f"{fmt(ws1.get('reader', {}).get('bytes', 0) / ws1['events'] if ws1 else None, ',.0f')}, W5 "
                         f"{fmt(ws5['reader'].get('bytes', 0) / ws5['events'], ',.0f')}")
        out.append("Drains of the two backlogs by the same systems (each row's W1 and W5 from this run; "
                   "W1 and W5 may differ in size, the rates are per event).\n\n" + "\n".join(lines)
                   + ("\n\n" + ".  \n".join(facts) + "." if facts else ""))
    return "\n\n".join(out)


def cpu_table(results):
    rows = [r for r in results if r.get("cpu_share")]
    if not rows:
        return "Not profiled (run with `--profile`)."
    lines = ["| workload | system | " + " | ".join(PART_LABELS[k] for k in PARTS) + " |",
             "|---|---|" + "--:|" * len(PARTS)]
    for r in rows:
        w = r["workload"] + (f" {r['level_pct']} %" if r["workload"] == "W3" else "")
        lines.append(f"| {w} | {label(r['system'])} | " +
                     " | ".join(f"{r['cpu_share'][k]:.0f} %" for k in PARTS) + " |")
    return ("Share of the machine's CPUs (all cores = 100 %) while each system drained or each W3 level ran, "
            "from `perf record -a`; each process's hottest symbols are in `runs/*/profile.txt`.\n\n" +
            "\n".join(lines))


def replace_block(block, begin, end, heading=None):
    """Puts `block` between the markers `begin` and `end` of
    docs/benchmarks.md; without them, appends `heading` and the markers
    with it, or refuses when there is no heading."""
    path = os.path.join(REPO, "docs", "benchmarks.md")
    with open(path) as f:
        text = f.read()
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        _, post = rest.split(end, 1)
        text = pre + begin + "\n" + block + end + post
    elif heading:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{begin}\n{block}{end}\n"
    else:
        raise BenchError(f"{path} lacks the {begin} / {end} markers")
    with open(path, "w") as f:
        f.write(text)


def update_docs(block, svg, network=None):
    """The results block of docs/benchmarks.md and docs/benchmarks.svg; a
    run across a network (`network`: its condition and congestion control,
    `lan-bbr`) has a block and a plot of its own, in the section of the
    full runs per network condition."""
    if network is None:
        replace_block(block, "<!-- results:begin (written by benches/run.sh) -->", "<!-- results:end -->")
        name = "benchmarks.svg"
    else:
        name = f"benchmarks-{network}.svg"
        block = block.replace("](benchmarks.svg)", f"]({name})")
        replace_block(block, f"<!-- results-{network}:begin (written by benches/run.sh --net) -->",
                      f"<!-- results-{network}:end -->", heading=f"### `{network}`")
    with open(os.path.join(REPO, "docs", name), "w") as f:
        f.write(svg)
    return name


# --------------------------------------------------------------------------
# The broker drains (--brokers): walrelay against Debezium Server per broker.

BROKER_BEGIN = "<!-- broker-bench:begin -->"
BROKER_END = "<!-- broker-bench:end -->"
BROKER_HEADING = "## Beyond Kafka: NATS JetStream, Redis Streams, RabbitMQ and HTTP (issue 30)"
# The goals of issue 30, walrelay against Debezium Server on the same broker.
RATE_GOAL, RSS_GOAL = 3.0, 0.1


def _by_broker(results):
    return {(r["workload"], r.get("broker"), r["system"]): r for r in results}


def broker_table(results):
    """One row per broker, workload and system: the median round, every
    round, and walrelay's ratios to Debezium Server of the same broker and
    workload."""
    by = _by_broker(results)
    lines = ["| broker | workload | system | events/s (median) | every round, events/s | vs Debezium Server | "
             "CPU s / 1M events | vs Debezium Server | peak RSS MB | vs Debezium Server | walsender CPU s / 1M | "
             "broker CPU s / 1M | bytes per record in the broker | start-up s: streaming / first record |",
             "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    order = sorted(results, key=lambda r: (r["workload"], r.get("broker") or "", r.get("broker") is not None))
    for r in order:
        broker = r.get("broker") or "– (publishes nothing)"
        if "error" in r:
            lines.append(f"| {broker} | {r['workload']} | {label(r['system'])} | failed: {r['error']} |"
                         + " |" * 10)
            continue
        d = by.get((r["workload"], r.get("broker"), "dbz_server"))
        d = d if d and "error" not in d and r["system"] != "dbz_server" and r.get("broker") else None

        def vs(key, spec=".2f"):
            return fmt(r[key] / d[key] if d and d.get(key) and r.get(key) is not None else None, spec)
        lines.append(
            f"| {broker} | {r['workload']} | {label(r['system'])} | {fmt(r['events_per_s'])} | "
            f"{' / '.join(fmt(x) for x in r.get('rounds', [])) or '1 round'} | {vs('events_per_s')} | "
            f"{fmt(r['cpu_s_per_m'], '.1f')} | {vs('cpu_s_per_m')} | {fmt(r['peak_rss_mb'], '.1f')} | "
            f"{vs('peak_rss_mb', '.3f')} | {fmt(r.get('walsender_cpu_s_per_m'), '.1f')} | "
            f"{fmt(r.get('broker_cpu_s_per_m'), '.1f')} | {fmt(r.get('bytes_per_record'), ',.0f')} | "
            f"{fmt(r.get('startup_s'), '.2f')} / {fmt(r.get('first_record_s'), '.2f')} |")
    return "\n".join(lines)


def broker_goals(results):
    """Issue 30's goals per broker and workload, for each walrelay system:
    at least RATE_GOAL x Debezium Server's events/s at most RSS_GOAL of its
    peak RSS."""
    by = _by_broker(results)
    lines = ["| broker | workload | system | events/s vs Debezium Server (goal ≥ 3) | | "
             "peak RSS vs Debezium Server (goal ≤ 0.1) | |", "|---|---|---|--:|---|--:|---|"]
    for (w, b, s), r in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2])):
        if b is None or base_system(s) != "walrelay":
            continue
        d = by.get((w, b, "dbz_server"))
        if "error" in r or not d or "error" in d:
            lines.append(f"| {b} | {w} | {label(s)} | not measured | | not measured | |")
            continue
        rate = r["events_per_s"] / d["events_per_s"]
        rss = r["peak_rss_mb"] / d["peak_rss_mb"]
        lines.append(f"| {b} | {w} | {label(s)} | {rate:.2f} | {'met' if rate >= RATE_GOAL else '**not met**'} | "
                     f"{rss:.3f} | {'met' if rss <= RSS_GOAL else '**not met**'} |")
    return "\n".join(lines)


def broker_report(args, facts, results, command):
    head = []
    if args.quick:
        head.append("> **Smoke run (`--quick`, small sizes): it checks that the tooling works; "
                    "these numbers are not the result.**\n")
    brokers = ", ".join(facts.get("brokers", {}).values()) or ", ".join(args.brokers)
    only = args.only.split(",")
    sizes = "; ".join(x for k, x in (("W1", f"W1 {args.w1:,} single-event transactions (insert + delete)"),
                                    ("W2", f"W2 {args.w2:,} rows in {args.w2_batch}-row insert-only transactions"))
                      if k in only)
    head.append(
        f"Command: `{command}`  \n"
        f"Date: {facts['date_utc']}, walrelay {facts['walrelay_commit']}"
        f"{' (uncommitted changes)' if facts['worktree_dirty'] else ''}  \n"
        f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, Linux {facts['kernel']}, "
        f"load average {facts['load_average_at_start']} at start and {facts.get('load_average_at_end', '?')} "
        f"at the end  \n"
        f"{network_line(facts)}  \n"
        f"{facts['postgres']}; {brokers}; Debezium Server {facts.get('debezium_server_java_version', '?')}, "
        f"JVM options `{facts.get('dbzs_java_opts', '?')}`{_extra_java_opts(results, facts.get('dbzs_java_opts'))}; everything co-located on "
        f"this machine.  \n"
        f"Sizes: {sizes}. Payload: about {args.payload_bytes if hasattr(args, 'payload_bytes') else '?'} bytes of "
        f"JSON (jsonb). {args.rounds} interleaved round(s) per system and broker, the median reported.\n")
    return ("\n".join(head) + "\n" + broker_table(results) + "\n\nIssue 30's goals, walrelay against Debezium "
            "Server on the same broker, same workload, same run:\n\n" + broker_goals(results) + "\n")


def _extra_java_opts(results, base):
    """Debezium Server's JVM options where a broker added to --dbzs-java-opts
    (Kinesis on moto: -Daws.cborEnabled=false), as `; on BROKER: OPTIONS`."""
    per = {}
    for r in results:
        o = r.get("dbzs_java_opts")
        if o and r.get("broker") and o != base:
            per.setdefault(r["broker"], o)
    return "".join(f", on {b} `{o}`" for b, o in per.items())


def update_broker_docs(block, network=None):
    """The broker drains' block of docs/benchmarks.md; a run across a
    network (`network`, as update_docs takes it) has a block of its own in
    the section of the runs per network condition."""
    if network is None:
        replace_block(block, BROKER_BEGIN, BROKER_END, BROKER_HEADING)
    else:
        replace_block(block, f"<!-- broker-bench-{network}:begin (written by benches/run.sh --brokers --net) -->",
                      f"<!-- broker-bench-{network}:end -->", heading=f"### NATS and Redis across `{network}`")

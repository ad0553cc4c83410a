"""The plots of a run, one matplotlib figure written as SVG: drain
throughput per workload with every round as a point, W3 latency
percentiles per stage of walrelay, and CPU per event per process (system,
walsender, broker). matplotlib draws everything; this module only picks
what goes where. The SVG is reproducible (no date, a fixed hash salt)."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
import matplotlib.ticker  # noqa: E402

from .drains import DRAINS
from .stats import QUANTILES
from .systems import WALRELAYS, base_system, label

COLORS = {"ceiling": "#888888", "walsender": "#2ca02c", "walrelay": "#1f77b4", "walrelay-eos": "#9467bd",
          "dbz_tuned": "#d62728", "dbz_default": "#ff9896"}


def figure(results):
    """The plots, one matplotlib figure: drain throughput per workload with
    every round as a point, W3 latency percentiles per stage of walrelay,
    and CPU s per 1M events per process (system, walsender, broker)."""
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "walrelay-bench", "font.size": 8})

    drains = [r for r in results if r["workload"] in DRAINS and "error" not in r]
    w3 = [r for r in results if r["workload"] == "W3" and "error" not in r and r.get("p50_ms") is not None
          and base_system(r["system"]) in WALRELAYS]
    pinned = len({r.get("pinned", False) for r in drains + w3}) > 1

    def name(r):
        return label(r["system"]) + (" [pinned]" if pinned and r.get("pinned") else "")

    # A plain system has its colour; each variant one of its own.
    extra = iter(plt.get_cmap("Dark2").colors * 4)
    variant_colors = {s: COLORS[s] if s in COLORS else next(extra)
                      for s in dict.fromkeys(r["system"] for r in drains)}

    def color(r):
        return variant_colors.get(r["system"], COLORS.get(base_system(r["system"]), "#555555"))

    fig, axes = plt.subplots(3, 1, figsize=(13, 13), layout="constrained")
    # 1. Throughput: a bar per system (median round), the rounds as points.
    ax = axes[0]
    workloads = list(dict.fromkeys(r["workload"] for r in drains))
    series = list(dict.fromkeys(name(r) for r in drains))
    width = 0.8 / max(1, len(series))
    for i, sname in enumerate(series):
        for j, w in enumerate(workloads):
            r = next((x for x in drains if x["workload"] == w and name(x) == sname), None)
            if r is None:
                continue
            x = j - 0.4 + width * (i + 0.5)
            # Pinned: lighter, with a dashed outline (hatches would make the SVG large).
            ax.bar(x, r["events_per_s"], width * 0.9, color=color(r), alpha=0.5 if r.get("pinned") else 1.0,
                   linestyle="--" if r.get("pinned") else "-", edgecolor="black",
                   linewidth=0.9 if r.get("pinned") else 0.3,
                   label=sname if j == workloads.index(next(x["workload"] for x in drains if name(x) == sname))
                   else None)
            pts = [v for v in r.get("rounds", [r["events_per_s"]]) if v is not None]
            ax.plot([x] * len(pts), pts, "o", color="black", markersize=2.5)
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_ylabel("events/s")
    ax.set_title("Backlog drain throughput (bar: median round; points: every round; dashed: pinned; "
                 "higher is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)

    # 2. W3 latency: per walrelay system and level, p50/p90/p99/p99.9 of the
    # exact end to end and of each stage (interpolated), log scale.
    ax = axes[1]
    groups = []
    for r in w3:
        rows = [("commit → LogAppendTime (exact)", {f"{q}_ms": r.get(f"{q}_ms") for q, _ in QUANTILES})]
        rows += [(stage, st) for stage, st in (r.get("stages") or {}).items()]
        groups.append((f"{name(r)}\n{r['level_pct']} %", rows))
    stage_names = list(dict.fromkeys(st for _, rows in groups for st, _ in rows))
    markers = dict(zip([q for q, _ in QUANTILES], ("o", "s", "^", "v")))
    cmap = plt.get_cmap("tab10")
    for gi, (_, rows) in enumerate(groups):
        for stage, st in rows:
            si = stage_names.index(stage)
            x = gi - 0.4 + 0.8 * (si + 0.5) / max(1, len(stage_names))
            vals = [st.get(f"{q}_ms") for q, _ in QUANTILES if (st.get(f"{q}_ms") or 0) > 0]
            if vals:
                ax.plot([x, x], [min(vals), max(vals)], "-", color=cmap(si % 10), linewidth=0.8)
            for q, _ in QUANTILES:
                v = st.get(f"{q}_ms")
                if v is not None and v > 0:
                    ax.plot(x, v, markers[q], color=cmap(si % 10), markersize=4,
                            label=f"{stage}" if (gi, q) == (0, "p50") else None)
    for q, m in markers.items():
        ax.plot([], [], m, color="black", label=q.replace("p999", "p99.9"), markersize=4)
    if groups:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=7)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.text(0.5, 0.5, "W3 not run with walrelay", ha="center", transform=ax.transAxes)
    ax.set_ylabel("ms (log)")
    ax.set_title("W3 latency per stage: p50 / p90 / p99 / p99.9 (stages from walrelay's histograms, approximate "
                 "to the bucket; lower is better)")
    ax.grid(axis="y", alpha=0.3, which="both")

    # 3. CPU per event per process, stacked: system, walsender, broker.
    ax = axes[2]
    parts = (("cpu_s_per_m", "system under test", 1.0), ("walsender_cpu_s_per_m", "walsender", 0.55),
             ("broker_cpu_s_per_m", "Kafka broker", 0.25))
    bars = [(f"{r['workload']}\n{name(r)}", r) for r in drains]
    for i, (_, r) in enumerate(bars):
        bottom = 0.0
        for key, what, alpha in parts:
            v = r.get(key)
            if v is None:
                continue
            ax.bar(i, v, 0.7, bottom=bottom, color=color(r), alpha=alpha, edgecolor="black", linewidth=0.3)
            bottom += v
    for key, what, alpha in parts:
        ax.bar(0, 0, color="dimgray", alpha=alpha, edgecolor="black", linewidth=0.3, label=what)
    ax.set_xticks(range(len(bars)), [b for b, _ in bars], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("CPU s per 1M events")
    ax.set_title("CPU per event, per process, stacked: system under test, walsender (lighter), broker "
                 "(lightest) (drains; lower is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)

    return fig


def svg_plot(results):
    """figure(results) as SVG text."""
    fig = figure(results)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()

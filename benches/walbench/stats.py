"""The arithmetic of the results: percentiles of exact samples (nearest
rank), and of histograms (cumulative buckets, read twice and subtracted,
percentiles interpolated inside the bucket). Pure functions."""

import math

# The percentiles the latency tables report: (column name, quantile).
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def percentile(sorted_vals, q):
    """The nearest-rank q-quantile (0 < q <= 1) of sorted values: the
    smallest value with at least q of them at or below it; None if empty."""
    if not sorted_vals:
        return None
    # The tolerance keeps 0.999 * 1000 at rank 999, not 1000.
    rank = math.ceil(q * len(sorted_vals) - 1e-9)
    return sorted_vals[min(len(sorted_vals), max(1, rank)) - 1]


def histogram(buckets, count, total):
    """A histogram: [(upper bound, cumulative count)] ascending, the last
    bound +inf (all `count` observations), and the sum of the values."""
    out = sorted((float(le), float(c)) for le, c in buckets if le != float("inf"))
    return {"buckets": out + [(float("inf"), float(count))], "count": float(count), "sum": float(total)}


def histogram_delta(after, before):
    """`after` minus `before` (cumulative buckets with the same bounds)."""
    if not before:
        return after
    prev = dict(before["buckets"])
    return {"buckets": [(le, c - prev.get(le, 0.0)) for le, c in after["buckets"]],
            "count": after["count"] - before["count"], "sum": after["sum"] - before["sum"]}


def histogram_quantile(h, q):
    """The q-quantile of a histogram, by linear interpolation inside the
    bucket it falls in (the lower bound of the first bucket is 0): exact
    only to the bucket's width. In the +Inf bucket: the last finite bound.
    None without observations."""
    total = h["buckets"][-1][1] if h["buckets"] else 0
    if total <= 0:
        return None
    rank, lo, below = q * total, 0.0, 0.0
    for le, cum in h["buckets"]:
        if cum >= rank:
            if le == float("inf"):
                return lo
            inside = cum - below
            return lo + (le - lo) * ((rank - below) / inside if inside > 0 else 1.0)
        lo, below = le, cum
    return lo

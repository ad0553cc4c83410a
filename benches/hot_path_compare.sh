#!/usr/bin/env bash
# Per-event cost of the router against a baseline revision, in one
# invocation: the `route/*` and `pipeline/*` micro-benchmarks of
# `benches/hot_path.rs` built from the working tree and from REV (a git
# worktree under target/hot-path-baseline), run in alternating rounds so
# both see the same machine, reported as the median of each round's
# estimate and the ratio.
#
#   benches/hot_path_compare.sh REV [ROUNDS]    (default 3 rounds)
#
# Benchmarks the baseline does not have (the chain variants) are reported
# against the working tree's own `route/<converter>` instead: what a chain
# of three transforms adds per event.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: benches/hot_path_compare.sh REV [ROUNDS]}
rounds=${2:-3}
base=target/hot-path-baseline
if [ -d "$base" ]; then git worktree remove --force "$base"; fi
git worktree add -q --detach "$base" "$rev"
trap 'git worktree remove --force "$base" 2>/dev/null || true' EXIT
out=$(mktemp -d)
build() { (cd "$1" && cargo bench --bench hot_path --no-run -q 2>/dev/null); }
run() { (cd "$1" && cargo bench --bench hot_path -q -- '^(route|pipeline)/' --warm-up-time 1 --measurement-time 3 2>/dev/null) >> "$2"; }
build "$base"
build .
for _ in $(seq 1 "$rounds"); do
  run "$base" "$out/base"
  run . "$out/head"
done
python3 - "$out/base" "$out/head" "$rev" <<'EOF'
import re, statistics, sys
unit = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6}
def parse(path):
    got, name = {}, None
    for line in open(path):
        m = re.match(r"^((?:route|pipeline)/\S+)", line)
        if m:
            name = m.group(1)
        m = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if m and name:
            got.setdefault(name, []).append(float(m.group(1)) * unit[m.group(2)])
            name = None
    return {k: statistics.median(v) for k, v in got.items()}
base, head, rev = parse(sys.argv[1]), parse(sys.argv[2]), sys.argv[3]
print(f"{'benchmark':40} {'baseline ns':>12} {'head ns':>10} {'ratio':>7}")
for name, ns in sorted(head.items()):
    ref_name = name if name in base else name.replace("_chain3", "")
    ref = base.get(name) or head.get(ref_name)
    against = rev if name in base else ref_name + " (head)"
    print(f"{name:40} {ref:12.1f} {ns:10.1f} {ns / ref:7.3f}  vs {against}")
EOF

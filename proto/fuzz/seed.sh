#!/usr/bin/env bash
# Copies the recorded pgoutput fixtures (proto/tests/fixtures/*.txt) into the
# cargo-fuzz corpus directories, one file per message: the raw message for the
# `pgoutput` target, and the message wrapped in an XLogData frame (plus one
# keepalive) for the `frame` target. Safe to run again: files are named by
# content hash. Needs python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

python3 - "$here/../tests/fixtures" "$here/corpus" <<'PY'
import hashlib, pathlib, struct, sys

fixtures, corpus = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
pg, fr = corpus / "pgoutput", corpus / "frame"
pg.mkdir(parents=True, exist_ok=True)
fr.mkdir(parents=True, exist_ok=True)

def put(d, data):
    (d / ("seed-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)

# A keepalive asking for a reply: 'k', wal_end, send_time, 1.
put(fr, b"k" + struct.pack(">QqB", 0x16B374D848, 0, 1))

n = 0
for f in sorted(fixtures.glob("*.txt")) if fixtures.is_dir() else []:
    for line in f.read_text().splitlines():
        cols = line.split()
        if len(cols) < 3 or cols[0].startswith("#"):
            continue
        lsn_hi, lsn_lo = (int(x, 16) for x in cols[0].split("/"))
        data = bytes.fromhex(cols[2].removeprefix("\\x"))
        lsn = (lsn_hi << 32) | lsn_lo
        put(pg, data)
        # 'w' + wal_start + wal_end + send_time + data.
        put(fr, b"w" + struct.pack(">QQq", lsn, lsn, 0) + data)
        n += 1
print(f"seeded {n} fixture messages into {pg} and {fr}")
PY

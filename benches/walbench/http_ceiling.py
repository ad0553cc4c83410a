"""The HTTP receiver's own ceiling (`--http-ceiling`): benches/http_receiver.rs
alone under wrk (Debian's `wrk`), so that the HTTP drains are known not to
measure it. The request is what the drains send: a POST of a 1,000-byte
JSON body with five base64 `X-DEBEZIUM-*` headers (about 1.1 KB of
headers, as Debezium Server's and walrelay's requests carry). Both sinks in
the Debezium Server form send one request at a time on one connection, so
the rate that matters is wrk's with one connection (`-c1`), a round trip
per request; more connections show the receiver's throughput. The
receiver's CPU per request is from /proc over each run.
"""

import base64
import os
import re
import shutil
import subprocess
import tempfile

from . import BenchError, log
from .procs import cpu_of

HEADER = base64.b64encode(b'{"schema":{"type":"string","optional":false},"payload":"' + b"x" * 40 + b'"}').decode()
LUA = """wrk.method = "POST"
wrk.path = "/ceiling"
wrk.body = string.rep("x", 1000)
wrk.headers["content-type"] = "application/json"
{headers}
"""


def http_ceiling(receiver, seconds=10, connections=(1, 4, 16)):
    """Runs wrk against a fresh receiver for `seconds` per connection count:
    a list of {connections, requests_per_s, latency_avg, receiver_cpu_us_per_request,
    counted}."""
    if not receiver:
        raise BenchError("--http-ceiling needs --http-receiver (benches/run.sh builds it)")
    if not shutil.which("wrk"):
        raise BenchError("wrk not found (Debian: apt-get install wrk)")
    proc = subprocess.Popen([receiver, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().strip().split("=", 1)[1])
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "post.lua")
            names = ["__DEBEZIUM.CONTEXT.CONNECTORLOGICALNAME", "__DEBEZIUM.CONTEXT.CONNECTORNAME",
                     "__DEBEZIUM.CONTEXT.RUNID", "__DEBEZIUM.CONTEXT.TASKID", "ID"]
            with open(script, "w") as f:
                f.write(LUA.format(headers="\n".join(f'wrk.headers["X-DEBEZIUM-{n}"] = "{HEADER * 2}"'
                                                     for n in names)))
            out = []
            for c in connections:
                cpu0 = cpu_of(proc.pid)
                r = subprocess.run(["wrk", "-t", str(min(c, 2)), "-c", str(c), "-d", f"{seconds}s", "--latency",
                                    "-s", script, f"http://127.0.0.1:{port}"],
                                   capture_output=True, text=True, check=True)
                cpu = cpu_of(proc.pid) - cpu0
                rate = float(re.search(r"Requests/sec:\s+([\d.]+)", r.stdout).group(1))
                total = int(re.search(r"(\d+) requests in", r.stdout).group(1))
                lat = re.search(r"Latency\s+(\S+)", r.stdout).group(1)
                p99 = re.search(r"99%\s+(\S+)", r.stdout)
                res = {"connections": c, "requests_per_s": rate, "requests": total, "latency_avg": lat,
                       "latency_p99": p99.group(1) if p99 else None,
                       "receiver_cpu_us_per_request": cpu / total * 1e6 if total else None}
                log(f"http_receiver with wrk, {c} connection(s): {rate:,.0f} requests/s, latency avg {lat}, "
                    f"p99 {res['latency_p99']}, receiver {res['receiver_cpu_us_per_request']:.1f} CPU µs/request")
                out.append(res)
            return out
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

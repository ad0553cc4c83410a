#!/usr/bin/env python3
"""Prints the pgoutput messages of a live logical replication stream.

Used by record-fixtures.sh for scenarios the SQL decoding functions cannot
show: they decode WAL after the fact, so a streamed transaction that has
already aborted is cut short instead of ending in a Stream Abort. Here a
walsender decodes while the transaction is still open, as walrelay's does.

Output, one line per XLogData, same shape as the SQL recordings:
    <wal_start LSN> <xid> <hex of the pgoutput message>
The xid is taken from the messages (Begin, Stream Start, ...), as the SQL
functions report it. Stops after the first message whose tag is in
--stop-tags, or fails after --timeout seconds. Python standard library only;
trust authentication only (what scripts/pg.sh configures for postgres).
"""

import argparse
import select
import socket
import struct
import sys
import time

# Messages that carry a leading xid inside a Stream Start..Stop block.
IN_STREAM_XID_TAGS = b"RYIUDTM"


def send(sock, tag, payload):
    sock.sendall(tag + struct.pack("!I", len(payload) + 4) + payload)


def recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out waiting for the server")
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            continue
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def recv_message(sock, deadline):
    header = recv_exact(sock, 5, deadline)
    tag = header[:1]
    (length,) = struct.unpack("!I", header[1:])
    body = recv_exact(sock, length - 4, deadline)
    if tag == b"E":
        fields = dict(
            (f[:1], f[1:].decode("utf-8", "replace")) for f in body.split(b"\0") if f
        )
        raise RuntimeError("server error: %s" % fields.get(b"M", body))
    return tag, body


def fmt_lsn(lsn):
    return "%X/%X" % (lsn >> 32, lsn & 0xFFFFFFFF)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slot", required=True)
    ap.add_argument("--options", required=True,
                    help="pgoutput options as key=value,key=value")
    ap.add_argument("--stop-tags", required=True,
                    help="message tags (characters) after which to stop")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout
    stop_tags = args.stop_tags.encode()

    sock = socket.create_connection(("127.0.0.1", args.port))
    params = b"".join(k + b"\0" + v + b"\0" for k, v in [
        (b"user", b"postgres"), (b"database", b"postgres"),
        (b"replication", b"database"), (b"application_name", b"walrelay-recorder")])
    startup = struct.pack("!I", 196608) + params + b"\0"
    sock.sendall(struct.pack("!I", len(startup) + 4) + startup)
    while True:
        tag, body = recv_message(sock, deadline)
        if tag == b"R" and struct.unpack("!I", body[:4])[0] != 0:
            raise RuntimeError("server asks for a password; only trust is supported")
        if tag == b"Z":
            break

    opts = []
    for kv in args.options.split(","):
        key, value = kv.split("=", 1)
        opts.append('"%s" \'%s\'' % (key, value.replace("'", "''")))
    query = 'START_REPLICATION SLOT "%s" LOGICAL 0/0 (%s)' % (args.slot, ", ".join(opts))
    send(sock, b"Q", query.encode() + b"\0")
    while True:
        tag, body = recv_message(sock, deadline)
        if tag == b"W":
            break

    xid = 0
    in_stream = False
    out = sys.stdout
    while True:
        tag, body = recv_message(sock, deadline)
        if tag != b"d":
            continue
        kind = body[:1]
        if kind == b"k":
            if body[17:18] == b"\1":
                # Standby status update: nothing confirmed, just alive.
                now = int((time.time() - 946684800) * 1_000_000)
                send(sock, b"d", b"r" + struct.pack("!QQQqB", 0, 0, 0, now, 0))
            continue
        if kind != b"w":
            continue
        wal_start = struct.unpack("!Q", body[1:9])[0]
        data = body[25:]
        mtag = data[:1]
        if mtag == b"B":
            xid = struct.unpack("!I", data[17:21])[0]
        elif mtag == b"S":
            xid = struct.unpack("!I", data[1:5])[0]
            in_stream = True
        elif mtag == b"E":
            in_stream = False
        elif mtag in (b"A", b"c", b"p"):
            xid = struct.unpack("!I", data[1:5])[0]
        elif in_stream and mtag in IN_STREAM_XID_TAGS:
            xid = struct.unpack("!I", data[1:5])[0]
        out.write("%s %d %s\n" % (fmt_lsn(wal_start), xid, data.hex()))
        out.flush()
        if mtag in stop_tags:
            break
    sock.close()


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, TimeoutError, ConnectionError, OSError) as e:
        print("pgoutput-stream.py: error: %s" % e, file=sys.stderr)
        sys.exit(1)

#!/usr/bin/env python3
"""idle_conns.py -- opens N idle connections to a server and reports its memory per connection.

  idle_conns.py --port P --pid SERVER_PID [--n 1000] [--proto h2|h1] [--unix PATH]

h2: each connection sends the client preface and an empty SETTINGS frame, reads the server's
SETTINGS, acknowledges them, then stays idle.  h1: each connection makes one keep-alive request
(GET /healthz) and stays idle.  The server's VmRSS (from /proc) is read before and after (after a
pause), and the delta per connection printed as `per_conn_bytes=N`.  Used by bench/http.sh.
"""
import argparse
import resource
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def read_frames_until_settings(s):
    buf = b""
    while True:
        while len(buf) < 9:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("closed")
            buf += chunk
        length = int.from_bytes(buf[:3], "big")
        while len(buf) < 9 + length:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("closed")
            buf += chunk
        ftype, flags = buf[3], buf[4]
        buf = buf[9 + length:]
        if ftype == 4 and not flags & 1:
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--proto", default="h2")
    ap.add_argument("--path", default="/healthz")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.n + 100), hard))
    before = rss(a.pid)
    conns = []
    for _ in range(a.n):
        s = socket.create_connection(("127.0.0.1", a.port))
        s.settimeout(10)
        if a.proto == "h2":
            s.sendall(PREFACE + frame(4, 0, 0))
            read_frames_until_settings(s)
            s.sendall(frame(4, 1, 0))
        else:
            s.sendall(f"GET {a.path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            clen = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    clen = int(line.split(b":")[1])
            while len(body) < clen:
                body += s.recv(4096)
        conns.append(s)
    time.sleep(1.0)
    after = rss(a.pid)
    alive = 0
    for s in conns:
        s.setblocking(False)
        try:
            alive += 1 if s.recv(1) != b"" else 0
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    print(f"conns={a.n} alive={alive} rss_before={before} rss_after={after} "
          f"per_conn_bytes={(after - before) // max(a.n, 1)}")
    for s in conns:
        s.close()


if __name__ == "__main__":
    sys.exit(main())

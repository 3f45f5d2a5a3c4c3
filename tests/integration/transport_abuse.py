#!/usr/bin/python3
"""transport_abuse.py -- protocol abuse against the real binary (`cerea-sandbox serve` on a free
127.0.0.1 port, its own data dir, started and stopped by pid), with Debian's python3-h2 for the
HTTP/2 client side and raw frames where the abuse is the point.  Run by stage 20
(scripts/test.d/20-transport.sh); prints one line per check and "N passed, N failed".

  /usr/bin/python3 tests/integration/transport_abuse.py [--only NAME ...]
  (CEREA_BIN picks another binary)

Cases (issue 21):
  hpack_bomb    16 KiB HEADERS frames that decode to ~64 MB of header values each, over h2c and
                over TLS: the connection ends with GOAWAY at the first one, /healthz stays prompt,
                the server logs it once per connection.
  zero_window   h2c connections that set their window to 0 and ask for the big wasm on 100
                streams each, the server under RLIMIT_NOFILE 256: descriptors and memory stay
                bounded, other clients get a status line (200, or 503 when at the bound), and
                200 again right after.
  no_read       connections with huge windows that never read: buffered bytes per connection
                stay bounded.
  slow_upload   an upload trickling a byte a second is ended (408) within the body deadline;
                a crowd of uploads under RLIMIT_NOFILE 256 gets 503 + Retry-After beyond the
                bound, never 500 and never a connection closed without a status.
  h2_upload     an HTTP/2 upload (h2c and h2+TLS) slower than the header timeout but steady
                succeeds (201); a stalled one still ends.
  sse_headers   the event stream carries Cache-Control once.
"""
import json
import os
import resource
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CEREA_BIN") or os.path.join(ROOT, "build", "cerea-sandbox")
KEY = "abuse-test-key-0123456789abcdef0123"
WASM = "/pyodide/pyodide.asm.wasm"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}{': ' + str(detail) if detail else ''}", flush=True)


class Server:
    """The real binary on a free port; stopped by pid."""

    def __init__(self, nofile=None, tls=False):
        self.dir = tempfile.mkdtemp(prefix="tp-abuse-")
        self.logpath = os.path.join(self.dir, "log")
        args = [BIN, "serve", "--listen", "127.0.0.1:0", "--data", os.path.join(self.dir, "data")]
        if tls:
            self.cert = os.path.join(self.dir, "cert.pem")
            key = os.path.join(self.dir, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                            "/CN=localhost", "-keyout", key, "-out", self.cert],
                           check=True, capture_output=True)
            args += ["--tls-cert", self.cert, "--tls-key", key]

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        env = dict(os.environ, CEREA_API_KEY=KEY, CEREA_LOG=os.environ.get("CEREA_LOG", "warn"))
        self.log = open(self.logpath, "w+")
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, preexec_fn=limits)
        self.port = None
        for _ in range(200):
            with open(self.logpath) as f:
                text = f.read()
            i = text.find("(port ")
            if i >= 0:
                self.port = int(text[i + 6:text.index(")", i)])
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("server did not start:\n" + open(self.logpath).read())

    def text(self):
        with open(self.logpath) as f:
            return f.read()

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- plain HTTP/1.1 helpers ------------------------------------------------------------------

def read_status(s, timeout):
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except OSError:
        pass
    head = data.split(b"\r\n\r\n")[0].decode("latin-1")
    return (int(head[9:12]) if head.startswith("HTTP/1.1 ") else None), head


def http1(port, raw, timeout=5.0):
    """Sends raw bytes on a fresh connection; returns (status or None, head text, seconds)."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return None, "", time.monotonic() - t0
    try:
        s.sendall(raw)
        st, head = read_status(s, timeout)
    except OSError:
        st, head = None, ""
    finally:
        s.close()
    return st, head, time.monotonic() - t0


def healthz(port, timeout=5.0):
    return http1(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout)


def api(port, method, path, body=None, token=KEY):
    raw = json.dumps(body).encode() if body is not None else b""
    req = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\nConnection: close\r\n\r\n")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(req.encode() + raw)
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head[9:12]), json.loads(rest) if rest else None


class Prober(threading.Thread):
    """Asks /healthz every 200 ms on fresh connections while an attack runs."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.results, self.stop_flag = port, [], threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            self.results.append(healthz(self.port))
            time.sleep(0.2)

    def finish(self):
        self.stop_flag.set()
        self.join(10)
        return self.results


# ---- raw HTTP/2 frames -----------------------------------------------------------------------

def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hpack_str(b):
    """A raw (not Huffman) HPACK string: 7-bit-prefix length, then the bytes."""
    n = len(b)
    if n < 127:
        return bytes([n]) + b
    out, n = [127], n - 127
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def get_block(path, authority="127.0.0.1"):
    # :method GET, :scheme http, :path (indexed name 4), :authority (indexed name 1)
    return b"\x82\x86" + b"\x04" + hpack_str(path.encode()) + b"\x01" + hpack_str(authority.encode())


def raw_connect(port, tls_ctx=None, settings=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls_ctx:
        s = tls_ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(PREFACE + frame(4, 0, 0, settings))
    return s


def read_goaway(s, timeout):
    """Reads frames until EOF or timeout: (GOAWAY error code or None, closed); the GOAWAY's
    last stream id goes to read_goaway.last_id."""
    s.settimeout(0.2)
    buf, code, end = b"", None, time.monotonic() + timeout
    read_goaway.last_id = None
    while time.monotonic() < end:
        try:
            chunk = s.recv(1 << 16)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except OSError:
            return code, True
        if not chunk:
            return code, True
        buf += chunk
        while len(buf) >= 9:
            ln = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + ln:
                break
            if buf[3] == 7 and ln >= 8:
                code = int.from_bytes(buf[13:17], "big")
                read_goaway.last_id = int.from_bytes(buf[9:13], "big") & 0x7FFFFFFF
            buf = buf[9 + ln:]
    return code, False


def tls_client_ctx(alpn=("h2",)):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(list(alpn))
    return ctx


# ---- item 1: HPACK bomb ----------------------------------------------------------------------

def bomb_frames():
    """The first HEADERS frame adds a 4 KB literal to the dynamic table; every frame then
    references it (one byte each) until 16 KiB: ~64 MB of decoded values per frame."""
    lit = b"\x40" + hpack_str(b"x-a") + hpack_str(b"a" * 4000)  # incremental indexing
    first = b"\x82\x86\x84" + lit
    first += b"\xbe" * (16384 - len(first))
    rest = b"\x82\x86\x84" + b"\xbe" * (16384 - 3)
    return first, rest


def hpack_bomb(tls):
    tag = "TLS" if tls else "h2c"
    srv = Server(tls=tls)
    try:
        ctx = tls_client_ctx() if tls else None
        first, rest = bomb_frames()
        prober = Prober(srv.port)
        prober.start()
        tally = {"closed_first": 0, "went_on": 0, "conns": 0, "codes": set()}
        lock = threading.Lock()
        deadline = time.monotonic() + 4

        def attacker():
            # The attacker's shape: one connection, frame after frame; reconnect when closed.
            while time.monotonic() < deadline:
                try:
                    s = raw_connect(srv.port, ctx)
                except OSError:
                    continue
                sid, sent = 1, 0
                try:
                    s.settimeout(2)
                    s.sendall(frame(1, 0x5, sid, first))
                    sent += 1
                    while time.monotonic() < deadline and sent < 2000:
                        sid += 2
                        s.sendall(frame(1, 0x5, sid, rest))
                        sent += 1
                except OSError:
                    pass
                code, closed = read_goaway(s, 2)
                last = read_goaway.last_id
                s.close()
                with lock:
                    tally["conns"] += 1
                    if code is not None:
                        tally["codes"].add(code)
                    # Ended at the first frame: the GOAWAY says stream 1 was the last processed,
                    # whatever the client managed to write after it.  A GOAWAY naming a later
                    # stream means decoding went on.
                    if closed and last is not None and last <= 1:
                        tally["closed_first"] += 1
                    if last is not None and last > 1:
                        tally["went_on"] += 1

        ths = [threading.Thread(target=attacker, daemon=True) for _ in range(2)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(30)
        closed_first, conns, codes = tally["closed_first"], tally["conns"], tally["codes"]
        results = prober.finish()
        lat = sorted(r[2] for r in results)
        statuses = [r[0] for r in results]
        # (A connection cut short otherwise, at the attack's end or by a reset, has no GOAWAY to
        # read: nearly all must have ended at their first frame, none after it.)
        check(f"hpack bomb {tag}: each connection ends at its first frame ({conns} connections)",
              conns > 0 and closed_first >= 0.98 * conns and tally["went_on"] == 0,
              f"{closed_first} of {conns} closed there, {tally['went_on']} decoded on")
        check(f"hpack bomb {tag}: GOAWAY ENHANCE_YOUR_CALM or COMPRESSION_ERROR",
              codes and codes <= {0x9, 0xB}, codes)
        check(f"hpack bomb {tag}: /healthz answered during it ({len(results)} probes)",
              results and all(s == 200 for s in statuses), statuses)
        check(f"hpack bomb {tag}: /healthz prompt (max {lat[-1] if lat else 0:.3f} s)",
              lat and lat[-1] < 1.0, lat[-5:])
        logged = srv.text().count("header block")
        check(f"hpack bomb {tag}: logged, at most once per connection ({logged} lines)",
              1 <= logged <= conns, logged)
    finally:
        srv.stop()


# ---- item 2: descriptors and memory through zero-window streams ------------------------------

def zero_window():
    srv = Server(nofile=256)
    socks = []
    try:
        base_fds, base_rss = srv.fds(), srv.rss_kb()
        settings = struct.pack(">HI", 0x4, 0)  # SETTINGS_INITIAL_WINDOW_SIZE = 0
        prober = Prober(srv.port)
        prober.start()
        for _ in range(30):
            try:
                s = raw_connect(srv.port, settings=settings)
            except OSError:
                break
            s.sendall(frame(4, 1, 0))  # ack the server's SETTINGS
            block = get_block(WASM)
            s.sendall(b"".join(frame(1, 0x5, 2 * i + 1, block) for i in range(100)))
            socks.append(s)
        time.sleep(1.5)
        fds, rss = srv.fds(), srv.rss_kb()
        results = prober.finish()
        statuses = [r[0] for r in results]
        check(f"zero window: descriptors bounded ({base_fds} -> {fds} of 256)", fds < 200, fds)
        check(f"zero window: memory bounded (RSS +{(rss - base_rss) // 1024} MiB, 3000 streams)",
              rss - base_rss < 64 * 1024, rss - base_rss)
        check("zero window: other clients get a status line (200 or 503)",
              results and all(s in (200, 503) for s in statuses), statuses)
        # More connections than descriptors: past the budget a new client is answered 503 (with
        # Retry-After) and closed; never closed without a status before that.
        extra, first_refusal = [], None
        for i in range(300):
            try:
                extra.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            except OSError:
                break
            if i % 4 == 3:
                st, head, _ = healthz(srv.port)
                if st != 200:
                    first_refusal = (st, head[:200])
                    break
        check("zero window: past the descriptor budget a new client is answered 503 + Retry-After",
              first_refusal is not None and first_refusal[0] == 503 and
              "Retry-After:" in first_refusal[1], first_refusal)
        for e in extra:
            e.close()
        for s in socks:
            s.close()
        time.sleep(0.5)
        t0 = time.monotonic()
        st, _, dt = healthz(srv.port)
        check(f"zero window: 200 right after the attack ({dt:.3f} s)", st == 200 and dt < 1, st)
    finally:
        for s in socks:
            s.close()
        srv.stop()


def no_read():
    srv = Server()
    socks = []
    try:
        base_rss = srv.rss_kb()
        settings = struct.pack(">HI", 0x4, (1 << 31) - 1)
        for _ in range(20):
            s = raw_connect(srv.port, settings=settings)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(frame(4, 1, 0) + frame(8, 0, 0, struct.pack(">I", (1 << 30))))
            block = get_block(WASM)
            s.sendall(b"".join(frame(1, 0x5, 2 * i + 1, block) for i in range(100)))
            socks.append(s)
        time.sleep(2)
        rss = srv.rss_kb()
        check(f"no reader: buffered bytes bounded (RSS +{(rss - base_rss) // 1024} MiB, 20 conns x 100 streams)",
              rss - base_rss < 96 * 1024, rss - base_rss)
        st, _, dt = healthz(srv.port)
        check(f"no reader: /healthz meanwhile ({dt:.3f} s)", st == 200 and dt < 1, st)
    finally:
        for s in socks:
            s.close()
        srv.stop()


# ---- item 3: slow uploads --------------------------------------------------------------------

def upload_head(chat, name, length):
    return (f"POST /v1/chats/{chat}/files?name={name} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Length: {length}\r\n\r\n").encode()


def slow_upload():
    srv = Server(nofile=256)
    try:
        st, chat = api(srv.port, "POST", "/v1/chats", {})
        chat = chat["chat_id"]
        # A trickle: one byte a second of a 100 KB body.  Ended within the grace (10 s) plus a
        # little, not kept for the idle timeout (60 s) nor forever.
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(upload_head(chat, "trickle.bin", 100000))
        t0, status = time.monotonic(), None
        while time.monotonic() - t0 < 25:
            try:
                s.sendall(b"x")
            except OSError:
                break
            r, _, _ = select.select([s], [], [], 1.0)
            if r:
                status, _ = read_status(s, 2)
                break
        dt = time.monotonic() - t0
        s.close()
        check(f"slow upload: a trickle is ended with 408 ({dt:.1f} s)", status == 408 and dt < 20,
              (status, round(dt, 1)))
        # A crowd: 300 uploads held open under RLIMIT_NOFILE 256.  Past the bound: 503 with
        # Retry-After (or a connection answered 503 at once); never 500, never a silent close.
        crowd, early = [], []
        for i in range(300):
            try:
                c = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                c.sendall(upload_head(chat, f"crowd{i}.bin", 1000000) + b"y" * 100)
                crowd.append(c)
            except OSError as e:
                early.append(str(e))
        time.sleep(1)
        answered = []
        for c in crowd:
            c.setblocking(False)
            try:
                d = c.recv(65536)
                answered.append(d.split(b"\r\n")[0].decode("latin-1") if d else "closed")
            except BlockingIOError:
                pass
            except OSError as e:
                answered.append(str(e))
        s2 = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s2.sendall(upload_head(chat, "legit.bin", 5) + b"hello")
        st, head = read_status(s2, 5)
        s2.close()
        # Each refusal with a status is 503 (past the reserve too a connection is closed at once:
        # no status is possible there, so a reset counts as no status, not as a wrong one).
        statuses = [a for a in answered if a.startswith("HTTP/")]
        bad = [a for a in statuses if not a.startswith("HTTP/1.1 503")]
        check(f"slow upload crowd: refusals are 503, never 500 ({len(statuses)} answered of "
              f"{len(answered)} refused, 300 in all)", statuses and not bad and not early,
              (bad[:5], early[:3]))
        check("slow upload crowd: another client's upload gets 201 or 503 + Retry-After",
              st == 201 or (st == 503 and "Retry-After:" in head), head[:300])
        for c in crowd:
            c.close()
        time.sleep(0.5)
        s3 = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s3.sendall(upload_head(chat, "after.bin", 5) + b"hello")
        st, head = read_status(s3, 5)
        s3.close()
        check("slow upload crowd: 201 once the crowd left", st == 201, head[:200])
    finally:
        srv.stop()


# ---- item 4: HTTP/2 uploads slower than the header timeout -----------------------------------

def h2_upload_one(port, chat, tls_ctx, total, rate, stall_after=None, timeout=40):
    """Uploads `total` bytes at `rate` bytes/s over HTTP/2; returns (status or None, seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls_ctx:
        s = tls_ctx.wrap_socket(s, server_hostname="localhost")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "https" if tls_ctx else "http"),
                            (":authority", "localhost"),
                            (":path", f"/v1/chats/{chat}/files?name=h2-{time.monotonic_ns()}.bin"),
                            ("authorization", f"Bearer {KEY}"), ("content-length", str(total))])
    s.sendall(conn.data_to_send())
    s.settimeout(0.05)
    t0, sent, status, ended = time.monotonic(), 0, None, False
    while time.monotonic() - t0 < timeout and not ended:
        due = int((time.monotonic() - t0) * rate) if stall_after is None else min(
            stall_after, int((time.monotonic() - t0) * rate))
        want = min(total, due) - sent
        while want > 0 and not ended:
            n = min(want, 8192, conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if n <= 0:
                break
            end = sent + n == total
            conn.send_data(sid, b"z" * n, end_stream=end)
            sent += n
            want -= n
        s.sendall(conn.data_to_send())
        try:
            data = s.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except OSError:
            break
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[b":status"])
            if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                ended = True
        s.sendall(conn.data_to_send())
    s.close()
    return status, time.monotonic() - t0


def h2_upload():
    srv = Server(tls=True)
    try:
        st, chat = api(srv.port, "POST", "/v1/chats", {})
        chat = chat["chat_id"]
        out = {}

        def run(key, *a, **kw):
            out[key] = h2_upload_one(srv.port, chat, *a, **kw)

        # 240 KB at 16 KB/s: 15 s, past the 10 s header timeout; and a stall after 4 KB.
        ths = [threading.Thread(target=run, args=("h2c", None, 240000, 16000)),
               threading.Thread(target=run, args=("tls", tls_client_ctx(), 240000, 16000)),
               threading.Thread(target=run, args=("stall", None, 240000, 16000),
                                kwargs={"stall_after": 4096})]
        for t in ths:
            t.start()
        for t in ths:
            t.join(60)
        for key in ("h2c", "tls"):
            st, dt = out.get(key, (None, 0))
            check(f"h2 upload {key}: slow but steady for {dt:.1f} s -> 201", st == 201 and dt > 11,
                  (st, round(dt, 1)))
        st, dt = out.get("stall", (None, 0))
        check(f"h2 upload: a stalled body still ends ({st} after {dt:.1f} s)",
              st == 408 and dt < 30, (st, round(dt, 1)))
    finally:
        srv.stop()


# ---- item 9: the event stream's Cache-Control --------------------------------------------------

def sse_headers():
    srv = Server()
    try:
        st, chat = api(srv.port, "POST", "/v1/chats", {})
        token = chat["page_token"]
        st, head, _ = http1(srv.port, (f"GET /v1/chats/{chat['chat_id']}/events?page_id=p1 HTTP/1.1\r\n"
                                       f"Host: x\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
        n = sum(1 for line in head.split("\r\n") if line.lower().startswith("cache-control:"))
        check(f"event stream: Cache-Control once ({n})", st == 200 and n == 1, head)
    finally:
        srv.stop()


CASES = {"hpack_bomb": lambda: (hpack_bomb(False), hpack_bomb(True)), "zero_window": zero_window,
         "no_read": no_read, "slow_upload": slow_upload, "h2_upload": h2_upload,
         "sse_headers": sse_headers}

if __name__ == "__main__":
    only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv else list(CASES)
    for name in only:
        try:
            CASES[name]()
        except Exception as e:  # a case that could not run is a failure, with its reason
            check(f"{name}: ran", False, repr(e))
    print(f"transport abuse: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)

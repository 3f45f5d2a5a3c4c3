#!/usr/bin/python3
"""make_seeds.py -- writes the seed corpora of the transport's fuzz targets (corpus/http1,
corpus/h2): one file per seed, its first byte the harness's piece size (0: the input in one
write).  Run again after changing a seed; the files are committed.  Regression inputs (what the
fuzzer once found) live beside them as regress-*, written by hand from the finding, never by
this script.

  /usr/bin/python3 tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data, piece=0):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes([piece]) + data)


# ---- HTTP/1.1 -------------------------------------------------------------------------------
H1 = {
    "get": b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
    "head": b"HEAD /hello HTTP/1.1\r\n\r\n",
    "http10": b"GET /hello HTTP/1.0\r\n\r\n",
    "params": b"GET /items/a%20b?q=x+y&k=v HTTP/1.1\r\n\r\nGET /files/a/b%2Fc HTTP/1.1\r\n\r\n",
    "pipelined": b"GET /hello HTTP/1.1\r\n\r\nGET /hdr?k=1 HTTP/1.1\r\nX-Last: z\r\n\r\n"
                 b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    "chunked": b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x=y\r\n!"
               b"\r\n0\r\nTrailer: t\r\n\r\n",
    "sink": b"POST /sink HTTP/1.1\r\nContent-Length: 20\r\n\r\n01234567890123456789",
    "sink_chunked": b"POST /sink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                    b"POST /sink-refuse HTTP/1.1\r\nContent-Length: 12\r\n\r\n0123456789ab",
    "expect": b"POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nok",
    "static": b"GET /static/a.txt HTTP/1.1\r\nAccept-Encoding: gzip, br\r\n\r\n"
              b"GET /static/big.txt HTTP/1.1\r\nRange: bytes=100-199\r\n\r\n"
              b"GET /static/big.txt HTTP/1.1\r\nAccept-Encoding: gzip\r\nIf-None-Match: \"x\"\r\n\r\n",
    "static_big": b"GET /static/big.txt HTTP/1.1\r\nRange: bytes=-5000\r\nIf-Range: \"q\"\r\n\r\n"
                  b"GET /static/ HTTP/1.1\r\n\r\nGET /static/../x HTTP/1.1\r\n\r\n",
    "sse": b"GET /sse HTTP/1.1\r\n\r\nGET /chunks HTTP/1.1\r\n\r\n",
    "held": b"GET /poll HTTP/1.1\r\n\r\n",
    "methods": b"DELETE /hello HTTP/1.1\r\n\r\nOPTIONS * HTTP/1.1\r\n\r\n",
    "upgrade": b"GET /hello HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
    "refused": b"GET /hello HTTP/9.9\r\n\r\n",
    "fold": b"GET /hello HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n",
}
for name, data in H1.items():
    write("http1", name, data)
write("http1", "pipelined_pieces", H1["pipelined"], piece=3)
write("http1", "chunked_pieces", H1["chunked"], piece=1)

# ---- HTTP/2 (what follows the preface) --------------------------------------------------------


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hstr(b):
    assert len(b) < 127
    return bytes([len(b)]) + b


def block(method_idx, path, extra=b""):
    # :method (static index), :scheme http, :path (literal, indexed name 4), :authority x
    return bytes([0x80 | method_idx, 0x86, 0x04]) + hstr(path) + b"\x01" + hstr(b"x") + extra


SETTINGS = frame(4, 0, 0, struct.pack(">HI", 0x4, 65535) + struct.pack(">HI", 0x3, 100))
ACK = frame(4, 1, 0)
GET, POST = 2, 3
EH, ES = 0x4, 0x1
H2 = {
    "get": SETTINGS + ACK + frame(1, EH | ES, 1, block(GET, b"/hello")),
    "several": SETTINGS + b"".join(frame(1, EH | ES, 2 * i + 1, block(GET, p)) for i, p in
                                   enumerate([b"/hello", b"/items/7?q=a", b"/nope", b"/chunks",
                                              b"/sse", b"/large"])),
    "post": SETTINGS + frame(1, EH, 1, block(POST, b"/echo", b"\x0f\x0d\x01" + b"5")) +
            frame(0, 0, 1, b"he") + frame(0, ES, 1, b"llo"),
    "sink": SETTINGS + frame(1, EH, 1, block(POST, b"/sink")) + frame(0, 0, 1, b"x" * 300) +
            frame(0, 0x8, 1, b"\x03abc\0\0\0") + frame(0, ES, 1, b"end"),
    "trailers": SETTINGS + frame(1, EH, 1, block(POST, b"/sink")) + frame(0, 0, 1, b"abc") +
                frame(1, EH | ES, 1, b"\x40" + hstr(b"x-t") + hstr(b"v")),
    "static_window": frame(4, 0, 0, struct.pack(">HI", 0x4, 0)) +
                     frame(1, EH | ES, 1, block(GET, b"/static/big.txt")) +
                     frame(8, 0, 1, struct.pack(">I", 20000)) + frame(8, 0, 0, struct.pack(">I", 20000)),
    "continuation": SETTINGS + frame(1, 0, 1, block(GET, b"/hdr")[:4]) +
                    frame(9, EH, 1, block(GET, b"/hdr")[4:] + b"\x40" + hstr(b"x-last") + hstr(b"q")),
    "reset": SETTINGS + frame(1, EH, 1, block(POST, b"/poll")) +
             frame(3, 0, 1, struct.pack(">I", 8)) + frame(1, EH | ES, 3, block(GET, b"/poll")),
    "control": SETTINGS + frame(6, 0, 0, b"12345678") + frame(2, 0, 3, b"\0\0\0\x01\x10") +
               frame(7, 0, 0, struct.pack(">II", 0, 0)),
    "priority_headers": SETTINGS + frame(1, EH | ES | 0x20, 1, b"\0\0\0\0\x10" + block(GET, b"/hello")),
    "dynamic_table": SETTINGS + frame(1, EH | ES, 1, block(GET, b"/hello", b"\x40" + hstr(b"x-a") + hstr(b"1"))) +
                     frame(1, EH | ES, 3, block(GET, b"/hello", b"\xbe")),
    "sse_and_hold": SETTINGS + frame(1, EH | ES, 1, block(GET, b"/sse-open")) +
                    frame(1, EH | ES, 3, block(GET, b"/hold")),
}
for name, data in H2.items():
    write("h2", name, data)
write("h2", "post_pieces", H2["post"], piece=2)

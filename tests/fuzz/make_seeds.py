#!/usr/bin/python3
"""make_seeds.py -- writes the seed corpora of the fuzz targets: one file per seed.  The
transport's (corpus/http1, corpus/h2) start with the harness's piece size (0: the input in one
write); the orchestrator's (corpus/api) with the handler, credential and piece bytes fuzz_api.c
describes; file names (corpus/naming) with the source; answers (corpus/blocks) are the text
alone.  Run again after changing a seed; the files are committed.  Regression inputs (what the
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


# ---- the orchestrator's handlers (fuzz_api.c: handler, flags, piece, then the body) -----------


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


CHAT_NEW, RENAME, RUN, FINISH, PRESENCE, STARTED, RESULT, SETTINGS_, UPLOAD, OUTPUT = range(10)
API_KEY, OWN_TOKEN, OTHER_TOKEN, NO_CRED = range(4)
EOF_EARLY = 4
OUT_SHA = b"98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"  # sha256 of "hi\n"
API = {
    "chat_new": (CHAT_NEW, API_KEY, b'{"title":"Sales 2026"}'),
    "chat_new_empty": (CHAT_NEW, API_KEY, b""),
    "chat_new_page_token": (CHAT_NEW, OWN_TOKEN, b'{"title":null}'),
    "rename": (RENAME, OWN_TOKEN, b'{"title":"  Q3 figures \\u2014 draft  "}'),
    "rename_separator": (RENAME, API_KEY, b'{"title":"a\\u2028b"}'),
    "run": (RUN, API_KEY, b'{"code":"print(6 * 7)"}'),
    "run_all_fields": (RUN, API_KEY, b'{"code":"import pandas as pd\\nprint(pd.read_csv(\'/mnt/data/'
                       b'sales.csv\'))","origin":"user","turn_id":"@T","timeout_s":5,"wait_s":0.5,'
                       b'"idempotency_key":"k-1"}'),
    "run_tool_turn": (RUN, OWN_TOKEN, b'{"code":"x = 1","origin":"tool","turn_id":"@T"}'),
    "run_big_timeout": (RUN, API_KEY, b'{"code":"x","timeout_s":1234567890123456789}'),
    "run_huge_int": (RUN, API_KEY, b'{"code":"x","timeout_s":99999999999999999999}'),
    "run_duplicate_key": (RUN, API_KEY, b'{"code":"x","code":"y"}'),
    "run_lone_surrogate": (RUN, API_KEY, b'{"code":"\\ud800"}'),
    "run_bad_utf8": (RUN, API_KEY, b'{"code":"\xff"}'),
    "run_control": (RUN, API_KEY, b'{"code":"x\x01"}'),
    "run_array": (RUN, API_KEY, b'[{"code":"x"}]'),
    "run_nulls": (RUN, API_KEY, b'{"code":"x","origin":null,"turn_id":null,"wait_s":null}'),
    "run_wait_eof": (RUN, API_KEY | EOF_EARLY, b'{"code":"while True: pass","wait_s":600}'),
    "run_pieces": (RUN, API_KEY, b'{"code":"for i in range(3):\\n    print(i)","origin":"auto"}'),
    "finish": (FINISH, API_KEY, b'{"answer":"Here it is:\\n\\n```python\\nprint(1)\\n```\\n\\nand '
               b'then\\n~~~py\\nx = 2\\n~~~\\n"}'),
    "finish_unclosed": (FINISH, API_KEY, b'{"answer":"```python\\nprint(1)\\n````\\nstill code"}'),
    "finish_none": (FINISH, API_KEY, b'{"answer":"No code here, only ```inline```."}'),
    "finish_page_token": (FINISH, OWN_TOKEN, b'{"answer":""}'),
    "presence_hidden": (PRESENCE, OWN_TOKEN, b'{"page_id":"pb","visible":false,"kernel":"busy"}'),
    "presence_ready": (PRESENCE, API_KEY, b'{"page_id":"pb","visible":true,"kernel":"ready"}'),
    "presence_dead": (PRESENCE, OWN_TOKEN, b'{"page_id":"pb","kernel":"dead"}'),
    "presence_other_page": (PRESENCE, OWN_TOKEN, b'{"page_id":"p-2.x_y","visible":true}'),
    "presence_other_chat": (PRESENCE, OTHER_TOKEN, b'{"page_id":"pb","visible":true}'),
    "started": (STARTED, OWN_TOKEN, b'{"attempt":1,"page_id":"pb"}'),
    "started_stale": (STARTED, OWN_TOKEN, b'{"attempt":2}'),
    "started_other_page": (STARTED, API_KEY, b'{"attempt":1,"page_id":"pz"}'),
    "started_wrapping": (STARTED, OWN_TOKEN, b'{"attempt":4294967297}'),
    "result_ok": (RESULT, OWN_TOKEN, b'{"attempt":1,"status":"ok","stdout":"hi\\n","stderr":"",'
                  b'"files":[{"name":"out.txt","size":3,"sha256":"' + OUT_SHA + b'","kind":"file"}]}'),
    "result_every_field": (RESULT, OWN_TOKEN, b'{"attempt":1,"status":"error","stdout":"h\\u00e9 '
                           b'\\ud83d\\ude00 \xe2\x98\x83\\n","stderr":"e\\t\\"q\\"","stdout_truncated":true,'
                           b'"stderr_truncated":false,"error":{"type":"ValueError","message":"bad",'
                           b'"traceback":"tb"},"files":[],"files_unlisted":3,"figures_dropped":2,'
                           b'"notes":["n1","n2"],"restarted":true,"remounted":["a.csv"]}'),
    "result_nul": (RESULT, OWN_TOKEN, b'{"attempt":1,"status":"ok","stdout":"a\\u0000b","stderr":"",'
                   b'"files":[]}'),
    "result_not_uploaded": (RESULT, OWN_TOKEN, b'{"attempt":1,"status":"ok","files":[{"name":'
                            b'"plots/fig.png","kind":"figure"}]}'),
    "result_mismatch": (RESULT, API_KEY, b'{"attempt":1,"status":"ok","files":[{"name":"out.txt",'
                        b'"size":"3"}]}'),
    "result_timeout": (RESULT, OWN_TOKEN, b'{"attempt":1,"status":"timeout","restarted":true,'
                       b'"remounted":["a.csv","b (2).txt"],"notes":["the kernel was restarted"]}'),
    "result_eof": (RESULT, OWN_TOKEN | EOF_EARLY, b'{"attempt":1,"status":"cancelled"}'),
    "settings": (SETTINGS_, API_KEY, b'{"retention_days":7}'),
    "settings_all": (SETTINGS_, API_KEY, b'{"time_limit_s":120,"paused_wait_ms":1000,'
                     b'"page_grace_ms":5000,"retention_days":36500}'),
    "settings_bad": (SETTINGS_, API_KEY, b'{"time_limit_s":0}'),
    "settings_unknown": (SETTINGS_, API_KEY, b'{"listen":"0.0.0.0:80"}'),
    "settings_page_token": (SETTINGS_, OWN_TOKEN, b'{"retention_days":1}'),
    "upload": (UPLOAD, API_KEY, b"name=sales.csv\nmonth,total\n1,10\n2,20\n"),
    "upload_knowledge": (UPLOAD, OWN_TOKEN, b"name=Handbook.md&source=knowledge\n# Handbook\n"),
    "upload_output": (UPLOAD, API_KEY, b"source=output&name=plots/a.png\n\x89PNG\r\n\x1a\n"),
    "upload_text_of": (UPLOAD, API_KEY, b"text_of=@F\nThe extracted text.\n"),
    "upload_nul": (UPLOAD, API_KEY, b"name=a%00b.txt\nx"),
    "upload_nfd": (UPLOAD, API_KEY, b"name=cafe%CC%81.txt\nx"),
    "upload_trailing_dot": (UPLOAD, API_KEY, b"name=notes.\nx"),
    "upload_numbered": (UPLOAD, API_KEY, b"name=report%20(2).pdf\n%PDF-1.4 other\n"),
    "upload_same": (UPLOAD, API_KEY, b"name=report.pdf\n%PDF-1.4 fuzz\n"),
    "upload_invisible": (UPLOAD, API_KEY, b"name=%E2%80%8B%C2%AD\nx"),
    "upload_tool": (UPLOAD, API_KEY, b"source=tool&name=memo.docx\nPK\x03\x04"),
    "upload_bad_source": (UPLOAD, API_KEY, b"name=x&source=secret\nx"),
    "output": (OUTPUT, OWN_TOKEN, b"plots/fig (2).png\n\x89PNG\r\n\x1a\n"),
    "output_attempt": (OUTPUT, OWN_TOKEN, b"out.txt?attempt=1\nhi again\n"),
    "output_stale": (OUTPUT, OWN_TOKEN, b"figure-1.png?attempt=2\n"),
    "output_dotdot": (OUTPUT, API_KEY, b"../etc/passwd\nx"),
    "output_encoded_slash": (OUTPUT, OWN_TOKEN, b"a%2Fb.txt\nx"),
    "output_no_cred": (OUTPUT, NO_CRED, b"x.txt\nx"),
}
for name, (h, flags, body) in API.items():
    put("api", name, bytes([h, flags, 0]) + body)
put("api", "run_pieces_split", bytes([RUN, API_KEY, 1]) + API["run_pieces"][2])
put("api", "upload_pieces", bytes([UPLOAD, API_KEY, 3]) + b"name=big.bin\n" + bytes(range(256)) * 8)

# ---- file names (fuzz_naming.c: the source, then the name) -------------------------------------
ATTACHMENT, KNOWLEDGE, TOOL, OUTPUT_ = range(4)
NAMES = {
    "plain": (ATTACHMENT, b"report.pdf"),
    "numbered": (ATTACHMENT, b"report (3).pdf"),
    "tar": (ATTACHMENT, b"logs (2).tar.gz"),
    "dotfile": (ATTACHMENT, b".bashrc"),
    "trailing_dot": (ATTACHMENT, b"notes."),
    "nfd": (ATTACHMENT, b"cafe\xcc\x81.txt"),
    "hangul_jamo": (KNOWLEDGE, b"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8.md"),
    "cjk": (ATTACHMENT, b"\xe6\x8a\xa5\xe5\x91\x8a (2).pdf"),
    "output_path": (OUTPUT_, b"plots/2026/fig (2).png"),
    "tool_path": (TOOL, b"docs/memo.docx"),
    "dotdot": (OUTPUT_, b"a/../b"),
    "absolute": (OUTPUT_, b"/etc/passwd"),
    "backslash": (OUTPUT_, b"..\\x"),
    "nul": (ATTACHMENT, b"a\x00b"),
    "control": (ATTACHMENT, b"a\x1bb"),
    "c1": (ATTACHMENT, b"a\xc2\x85b"),
    "bidi": (ATTACHMENT, b"invoice\xe2\x80\xaefdp.exe"),
    "zero_width": (ATTACHMENT, b"\xe2\x80\x8b\xe2\x80\x8d"),
    "soft_hyphen": (ATTACHMENT, b"\xc2\xad"),
    "spaces": (ATTACHMENT, b"   "),
    "blank_segment": (OUTPUT_, b"a/\xe3\x85\xa4/b"),
    "overlong": (ATTACHMENT, b"\xc0\xaf"),
    "surrogate": (ATTACHMENT, b"\xed\xa0\x80.txt"),
    "beyond_unicode": (ATTACHMENT, b"\xf4\x90\x80\x80"),
    "truncated": (ATTACHMENT, b"a\xe2\x82"),
    "long": (ATTACHMENT, b"a" * 251 + b".txt"),
    "long_nfc": (ATTACHMENT, b"e\xcc\x81" * 90),
    "max_number": (ATTACHMENT, b"x (999999999).txt"),
    "leading_zero": (ATTACHMENT, b"x (02).txt"),
    "slash_attachment": (ATTACHMENT, b"a/b.txt"),
    "empty_segment": (OUTPUT_, b"a//b"),
}
for name, (src, data) in NAMES.items():
    put("naming", name, bytes([src]) + data)

# ---- answers (fuzz_blocks.c: the markdown text) ------------------------------------------------
ANSWERS = {
    "two_blocks": b"Here:\n\n```python\nprint(1)\n```\n\nthen\n\n~~~py\nx = 2\n~~~\n",
    "unclosed": b"```python\nprint(1)\n```` not a close\nstill code",
    "longer_close": b"````python\na = '```'\n```\nb = 1\n`````\n",
    "indented": b"   ```Python3 {.numberLines}\n  x\n   ```\n    ```python\nnot a fence\n    ```\n",
    "other_lang": b"```js\nconsole.log(1)\n```\n```\nplain\n```\n```py\ny\n```",
    "crlf": b"```python\r\nprint(1)\r\n```\r\n",
    "backtick_info": b"```python `x`\nnot a fence\n```\n",
    "empty_block": b"```python\n```\n~~~python\n\n~~~\n```python",
    "tilde_in_backtick": b"```python\n~~~\n```\n",
    "no_newline": b"text ```python inline``` text",
    "nested_list": b"1. step\n   ```python\n   print(2)\n   ```\n> ```python\n> q\n> ```\n",
}
for name, data in ANSWERS.items():
    put("blocks", name, data)

# ---- a tool call's arguments (fuzz_tools.c: tool | scope << 3 | leave << 5, then the JSON) -----
RUN_PYTHON, LIST_FILES, ADD_FILE, WAIT_FOR_RUN, CANCEL_RUN = range(5)
BY_KEY, BY_A, BY_X = 0, 1 << 3, 2 << 3
ABANDON, ABANDON_LATER = 1 << 5, 2 << 5
TOOLS = {
    "run": (RUN_PYTHON, b'{"chat_id":"@A","code":"print(6 * 7)","timeout_s":30}'),
    "run_chat_key": (RUN_PYTHON | BY_A | ABANDON, b'{"code":"x = 1"}'),
    "run_other_chat": (RUN_PYTHON | BY_X, b'{"chat_id":"@A","code":"x"}'),
    "run_real_timeout": (RUN_PYTHON | ABANDON_LATER, b'{"chat_id":"@A","code":"x","timeout_s":5.0}'),
    "run_no_chat": (RUN_PYTHON, b'{"chat_id":"0123456789abcdef0123456789abcdef","code":"x"}'),
    "run_long_chat_id": (RUN_PYTHON, b'{"chat_id":"' + "\u00e9".encode() * 60 + b'","code":"x"}'),
    "list": (LIST_FILES, b'{"chat_id":"@A"}'),
    "list_chat_key": (LIST_FILES | BY_X, b'{}'),
    "list_null": (LIST_FILES | BY_A, b'null'),
    "add_text": (ADD_FILE, b'{"chat_id":"@A","name":"notes.txt","text":"hello\\n"}'),
    "add_base64": (ADD_FILE | BY_A, b'{"name":"data.csv","base64":"YSxiCjEsMgo="}'),
    "add_base64_lines": (ADD_FILE | BY_A, b'{"name":"b.bin","base64":"YSxi\\nCjEs\\nMgo="}'),
    "add_bad_base64": (ADD_FILE, b'{"chat_id":"@X","name":"x.bin","base64":"!!!!"}'),
    "add_bad_name": (ADD_FILE, b'{"chat_id":"@A","name":"../etc/passwd","text":"x"}'),
    "add_both": (ADD_FILE, b'{"chat_id":"@A","name":"a","text":"x","base64":"eA=="}'),
    "add_abandoned": (ADD_FILE | ABANDON, b'{"chat_id":"@A","name":"c.txt","text":"abc"}'),
    "wait_ended": (WAIT_FOR_RUN, b'{"run_id":"@D"}'),
    "wait_live": (WAIT_FOR_RUN | BY_A, b'{"run_id":"@L","wait_s":0}'),
    "wait_live_abandoned": (WAIT_FOR_RUN | ABANDON_LATER, b'{"run_id":"@L","wait_s":3}'),
    "wait_other_chat": (WAIT_FOR_RUN | BY_X, b'{"run_id":"@L","wait_s":0}'),
    "wait_bad_wait": (WAIT_FOR_RUN, b'{"run_id":"@L","wait_s":-1.5}'),
    "cancel_live": (CANCEL_RUN, b'{"run_id":"@L"}'),
    "cancel_ended": (CANCEL_RUN | BY_A, b'{"run_id":"@D"}'),
    "cancel_other_chat": (CANCEL_RUN | BY_X, b'{"run_id":"@L"}'),
    "cancel_not_string": (CANCEL_RUN, b'{"run_id":7}'),
}
for name, (flags, args) in TOOLS.items():
    put("tools", name, bytes([flags]) + args)

# ---- a backup's manifest (fuzz_backup.c: how the backup and target differ, then the text) -------
GOOD = b"@D  cerea.db\n@B  @P\n@K  api_key\n@S  chat_key_secret\n@I  backup.info\n"
BACKUPS = {
    "good": (0x00, GOOD),
    "good_empty_target": (0x10, b"@I  backup.info\n@D  cerea.db\n@S  chat_key_secret\n@B  @P\n@K  api_key\n"),
    "non_empty_target": (0x20, GOOD),
    "no_info": (0x01, GOOD),
    "cut_blob": (0x02, GOOD),
    "extra_file": (0x04, GOOD),
    "other_format": (0x08, GOOD),
    "missing_line": (0x00, b"@D  cerea.db\n@I  backup.info\n@K  api_key\n@S  chat_key_secret\n"),
    "twice": (0x00, GOOD + b"@K  api_key\n"),
    "dot_dot": (0x00, GOOD + b"@B  blobs/../../@P\n"),
    "blob_wrong_hash": (0x00, b"@D  cerea.db\n@D  @P\n@K  api_key\n@S  chat_key_secret\n@I  backup.info\n"),
    "no_newline": (0x00, GOOD[:-1]),
    "crlf": (0x00, GOOD.replace(b"\n", b"\r\n")),
    "upper_hex": (0x00, b"@D  cerea.db\n@B  @P\n@K  api_key\n@S  chat_key_secret\n@I  backup.info\n"
                  .replace(b"@K", b"ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789")),
    "escaped_name": (0x00, b"\\" + GOOD),
    "nul": (0x00, b"@D  cerea.db\0\n" + GOOD),
}
for name, (how, text) in BACKUPS.items():
    put("backup", name, bytes([how]) + text)

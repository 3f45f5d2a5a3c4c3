#!/usr/bin/env python3
"""build_wheels.py -- builds the offline office wheels from Debian's pure-Python packages.

No PyPI here: openpyxl (with et_xmlfile), XlsxWriter and pypdf are taken from the Debian packages
python3-openpyxl, python3-et-xmlfile, python3-xlsxwriter, python3-pypdf (installed by setup under
/usr/lib/python3/dist-packages) and zipped as py3-none-any wheels into ./wheelhouse/ (git-ignored):
the package's .py files (no __pycache__), and .dist-info/ with METADATA, WHEEL, RECORD and the
Debian copyright file as LICENSE.  Zips are deterministic (fixed timestamps, sorted entries), so a
rebuild gives the same sha256 and the sync stays idempotent.  It writes wheelhouse/wheels.json,
the wheel list scripts/sync_pyodide_wheels.mjs merges: [{name, version, file_name, sha256, source,
licence, imports, depends}].

It does not build anything with compiled code (python-docx, python-pptx, reportlab, seaborn need
lxml, pillow or numpy from a full Pyodide distribution) and never touches the network.

usage: python3 scripts/build_wheels.py [--out DIR] [--site DIR]
"""
import argparse
import base64
import hashlib
import io
import json
import os
import sys
import zipfile

SITE = "/usr/lib/python3/dist-packages"
EPOCH = (1980, 1, 1, 0, 0, 0)

# name (as Pyodide's lock spells it), distribution name, version, module folders, Debian package,
# licence (SPDX), lock depends, metadata source
WHEELS = [
    dict(name="et-xmlfile", dist="et_xmlfile", version="1.0.1", modules=["et_xmlfile"],
         deb="python3-et-xmlfile", licence="MIT", depends=[], summary="An implementation of lxml.xmlfile for the standard library"),
    dict(name="openpyxl", dist="openpyxl", version="3.0.9", modules=["openpyxl"],
         deb="python3-openpyxl", licence="MIT", depends=["et-xmlfile"],
         summary="A Python library to read/write Excel 2010 xlsx/xlsm files"),
    dict(name="xlsxwriter", dist="XlsxWriter", version="3.0.2", modules=["xlsxwriter"],
         deb="python3-xlsxwriter", licence="BSD-2-Clause", depends=[],
         summary="A Python module for creating Excel XLSX files."),
    dict(name="pypdf", dist="pypdf", version="3.4.1", modules=["pypdf"],
         deb="python3-pypdf", licence="BSD-3-Clause", depends=[],
         summary="A pure-python PDF library capable of splitting, merging, cropping, and transforming PDF files"),
]


def b64hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def deb_version(deb):
    try:
        with open("/var/lib/dpkg/status", encoding="utf-8") as f:
            block = None
            for line in f:
                if line.startswith("Package: "):
                    block = line.split(": ", 1)[1].strip()
                elif block == deb and line.startswith("Version: "):
                    return line.split(": ", 1)[1].strip()
    except OSError:
        pass
    return None


def build(w, site, out):
    for m in w["modules"]:
        if not os.path.isdir(os.path.join(site, m)):
            raise SystemExit("build_wheels: %s not found in %s: install %s (scripts/setup.d/10-apt.sh)"
                             % (m, site, w["deb"]))
    files = []  # (arcname, bytes)
    for m in w["modules"]:
        root = os.path.join(site, m)
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for n in sorted(names):
                if n.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(d, n)
                with open(full, "rb") as f:
                    files.append((os.path.relpath(full, site).replace(os.sep, "/"), f.read()))
    info = "%s-%s.dist-info" % (w["dist"], w["version"])
    debv = deb_version(w["deb"])
    meta = ["Metadata-Version: 2.1", "Name: " + w["dist"], "Version: " + w["version"],
            "Summary: " + w["summary"], "License: " + w["licence"], "Requires-Python: >=3.7"]
    meta += ["Requires-Dist: " + d.replace("-", "_") for d in w["depends"]]
    meta.append("")
    meta.append("Built offline by cerea-sandbox scripts/build_wheels.py from the Debian package %s %s."
                % (w["deb"], debv or "(version unknown)"))
    files.append((info + "/METADATA", ("\n".join(meta) + "\n").encode()))
    files.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: cerea-sandbox build_wheels.py\n"
                  b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    files.append((info + "/top_level.txt", ("\n".join(w["modules"]) + "\n").encode()))
    lic = "/usr/share/doc/%s/copyright" % w["deb"]
    if os.path.exists(lic):
        with open(lic, "rb") as f:
            files.append((info + "/LICENSE", f.read()))
    record = "".join("%s,%s,%d\n" % (a, b64hash(b), len(b)) for a, b in files) + info + "/RECORD,,\n"
    files.append((info + "/RECORD", record.encode()))
    fname = "%s-%s-py3-none-any.whl" % (w["dist"], w["version"])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            zi = zipfile.ZipInfo(arc, EPOCH)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    data = buf.getvalue()
    path = os.path.join(out, fname)
    old = open(path, "rb").read() if os.path.exists(path) else None
    if old != data:
        with open(path, "wb") as f:
            f.write(data)
    return {"name": w["name"], "version": w["version"], "file_name": fname,
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
            "source": "debian:%s=%s" % (w["deb"], debv or "?"), "licence": w["licence"],
            "licence_file": lic, "imports": list(w["modules"]), "depends": list(w["depends"]),
            "written": old != data}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wheelhouse"))
    ap.add_argument("--site", default=SITE)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    listing = [build(w, a.site, out) for w in WHEELS]
    written = sum(1 for x in listing if x.pop("written"))
    text = json.dumps(listing, indent=1) + "\n"
    lp = os.path.join(out, "wheels.json")
    if not os.path.exists(lp) or open(lp).read() != text:
        with open(lp, "w") as f:
            f.write(text)
    print("build_wheels: %d wheels in %s (%d rebuilt): %s" % (
        len(listing), os.path.relpath(out), written, ", ".join(x["file_name"] for x in listing)))


if __name__ == "__main__":
    sys.exit(main())

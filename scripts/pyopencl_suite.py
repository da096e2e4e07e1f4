#!/usr/bin/env python3
"""Helpers of scripts/pyopencl-suite.sh (standard library only).

fetch-tests VERSION DEST
    Downloads pyopencl's sdist of VERSION from PyPI's simple index (the
    wheel has no tests; `pip download --no-binary` would try to build it),
    checks its sha256 against the index and extracts its test/ folder.

compare NATIVE_XML REMOTE_XML KNOWN_FILE SUMMARY_OUT
    Compares per-test outcomes of the two junit-xml reports. Exit status 1
    when a test passes natively but not through Wormhole and is not listed
    (with its cause) in KNOWN_FILE; 0 otherwise.
"""

import hashlib
import io
import os
import re
import sys
import tarfile
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter


def fetch_tests(version: str, dest: str) -> None:
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    with urllib.request.urlopen(f"{index}/pyopencl/", timeout=120) as r:
        page = r.read().decode("utf-8", "replace")
    name = f"pyopencl-{version}.tar.gz"
    m = re.search(r'href="([^"]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', page)
    if m is None:
        sys.exit(f"{name} is not in {index}/pyopencl/")
    url, digest = m.group(1), m.group(2)
    if url.startswith("/"):
        url = index.split("/simple")[0] + url
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != digest:
        sys.exit(f"{name}: sha256 mismatch")
    prefix = f"pyopencl-{version}/test/"
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.name.startswith(prefix) or not member.isfile():
                continue
            rel = member.name[len(prefix):]
            if ".." in rel.split("/"):
                continue
            out = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            src = tar.extractfile(member)
            if src is not None:
                with open(out, "wb") as f:
                    f.write(src.read())
    print(f"pyopencl {version} tests in {dest}")


def normalise(name: str) -> str:
    """A test id that is the same natively and remoted: drop our platform
    name prefix and object addresses from the parametrisation."""
    name = name.replace("Wormhole: ", "")
    return re.sub(r" at 0x[0-9a-f]+", "", name)


def short(name: str) -> str:
    return re.sub(r"\[<.*>\]", "", re.sub(r"<context factory for <[^>]*>>", "ctx", name))


def outcomes(path: str) -> dict:
    res = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = normalise(f"{case.get('classname')}::{case.get('name')}")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
                break
            if child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                break
        # A test can appear twice (a failed call plus an error in teardown).
        if key in res and res[key] != "passed":
            continue
        res[key] = outcome
    return res


def known(path: str) -> list:
    entries = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, _, cause = line.partition(" | ")
            entries.append((re.compile(pattern.strip()), cause.strip()))
    return entries


def compare(native_xml: str, remote_xml: str, known_file: str, summary: str) -> int:
    nat, rem = outcomes(native_xml), outcomes(remote_xml)
    kinds = ("passed", "failed", "error", "skipped", "xfailed")
    lines = []
    for label, res in (("native", nat), ("remoted", rem)):
        c = Counter(res.values())
        lines.append(f"{label:8} " + " ".join(f"{k}={c.get(k, 0)}" for k in kinds)
                     + f" total={len(res)}")
    expected, regressions, better = [], [], []
    entries = known(known_file)
    for key in sorted(set(nat) | set(rem)):
        a, b = nat.get(key, "missing"), rem.get(key, "missing")
        if a == "passed" and b != "passed":
            row = f"{short(key)}: native {a}, remoted {b}"
            cause = next((c for p, c in entries if p.search(row)), None)
            if cause is None:
                regressions.append(row)
            else:
                expected.append(f"{row} -- {cause}")
        elif b == "passed" and a != "passed":
            better.append(f"{short(key)}: native {a}, remoted {b}")
    lines.append(f"passing natively but not remoted, unexplained: {len(regressions)}")
    lines += [f"  REGRESSION {r}" for r in regressions]
    lines.append(f"passing natively but not remoted, known (cause given): {len(expected)}")
    lines += [f"  known {r}" for r in expected]
    lines.append(f"passing remoted but not natively: {len(better)}")
    lines += [f"  {r}" for r in better]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(summary, "w") as f:
        f.write(text)
    return 1 if regressions else 0


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "fetch-tests":
        fetch_tests(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 6 and sys.argv[1] == "compare":
        return compare(*sys.argv[2:])
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    sys.exit(main())

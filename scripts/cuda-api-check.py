#!/usr/bin/env python3
"""Checks crates/wormhole-cuda-api/cuda.api against NVIDIA's own files.

For every described function: it must be declared in cuda_runtime_api.h
with the same number of parameters (nvcc's registration entry points,
declared in crt/host_runtime.h, are checked against the library only), and,
given the real libcudart, exported by it with the soname's symbol version.
NVIDIA's files are not part of the repository; fetch them from PyPI with
--fetch (pip download, into --cache), which CI never needs.

  scripts/cuda-api-check.py --fetch            # 12.9 and 13.x wheels
  scripts/cuda-api-check.py --include DIR --lib DIR/../lib/libcudart.so.13
"""
import argparse
import pathlib
import re
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "crates/wormhole-cuda-api/cuda.api"
WHEELS = {"12": "nvidia-cuda-runtime-cu12==12.9.79", "13": "nvidia-cuda-runtime==13.5.37"}
# Declared for nvcc's generated host code, not in cuda_runtime_api.h.
NVCC_ONLY = re.compile(r"^__cuda")
# Entry points whose header name differs (CUDA 12's headers #define
# cudaGetDeviceProperties to the _v2 symbol), and the majors exporting them.
ALIASES = {"cudaGetDeviceProperties_v2": ("cudaGetDeviceProperties", {"12"})}


def described():
    """(name, parameter count, attributes) of every `fn` in cuda.api."""
    text = re.sub(r"#.*", "", API.read_text())
    out = []
    for m in re.finditer(r"\bfn\s+(\w+)\s*\((.*?)\)\s*->\s*([^;]*);", text, re.S):
        args = m.group(2).strip()
        depth, count = 0, (1 if args else 0)
        for c in args:
            depth += c in "([{"
            depth -= c in ")]}"
            count += c == "," and depth == 0
        out.append((m.group(1), count, m.group(3)))
    return out


def declared(header):
    """name -> parameter count, from cuda_runtime_api.h."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    out = {}
    for m in re.finditer(r"CUDARTAPI\s+(\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        params = re.sub(r"\([^()]*\)", "", m.group(2)).strip()  # drop __dv(x)
        n = 0 if params in ("", "void") else params.count(",") + 1
        out[m.group(1)] = n
    return out


def exported(lib):
    """Versioned dynamic symbols of a shared library."""
    r = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True, check=True)
    return {f.split()[-1] for f in r.stdout.splitlines() if "@@" in f}


def fetch(cache):
    cache.mkdir(parents=True, exist_ok=True)
    found = []
    for major, req in WHEELS.items():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", req, "-d", str(cache)], check=True)
        wheel = next(cache.glob(req.split("==")[0].replace("-", "_") + "-*.whl"))
        dest = cache / major
        with zipfile.ZipFile(wheel) as z:
            z.extractall(dest)
        inc = next(dest.rglob("cuda_runtime_api.h")).parent
        lib = next(dest.rglob(f"libcudart.so.{major}"))
        found.append((inc, lib))
    return found


def check(inc, lib):
    decl = declared(inc / "cuda_runtime_api.h")
    syms = exported(lib) if lib else set()
    soname = lib.name if lib else ""
    errors = 0
    major = soname.rsplit(".", 1)[-1]
    for name, n, _ in described():
        hname, majors = ALIASES.get(name, (name, None))
        if not NVCC_ONLY.match(name):
            if hname not in decl:
                print(f"  {name}: not declared in {inc}/cuda_runtime_api.h")
                errors += 1
            elif decl[hname] != n:
                print(f"  {name}: {n} parameters described, {decl[hname]} declared")
                errors += 1
        if majors is not None and major not in majors:
            continue
        if lib and f"{name}@@{soname}" not in syms:
            print(f"  {name}: not exported by {lib} as {name}@@{soname}")
            errors += 1
    print(f"{inc}: {len(described())} functions checked, {errors} problems")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--include", type=pathlib.Path)
    ap.add_argument("--lib", type=pathlib.Path)
    ap.add_argument("--fetch", action="store_true")
    ap.add_argument("--cache", type=pathlib.Path, default=pathlib.Path("/tmp/wormhole-cuda-headers"))
    a = ap.parse_args()
    pairs = fetch(a.cache) if a.fetch else [(a.include, a.lib)]
    if not pairs or pairs[0][0] is None:
        ap.error("give --include (and --lib) or --fetch")
    sys.exit(1 if sum(check(i, l) for i, l in pairs) else 0)


if __name__ == "__main__":
    main()

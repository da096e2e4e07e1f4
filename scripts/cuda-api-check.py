#!/usr/bin/env python3
"""Checks crates/wormhole/cuda-api/{cuda,cublas,cublaslt,curand,driver}.api against
NVIDIA's own files.

For every described function: it must be declared in the library's header
(cuda_runtime_api.h, cublas_api.h, curand.h) with the same number of
parameters (nvcc's registration entry points, declared in
crt/host_runtime.h, are checked against the library only), and, given the
real library, exported by it with the soname's symbol version. NVIDIA's
files are not part of the repository; fetch them from PyPI with --fetch
(pip download, into --cache), which CI never needs.

  scripts/cuda-api-check.py --fetch            # 12.x and 13.x wheels, all three
  scripts/cuda-api-check.py --include DIR --lib DIR/../lib/libcudart.so.13   # the runtime
  scripts/cuda-api-check.py --api driver.api --include DIR   # the driver calls, cuda.h only
"""
import argparse
import pathlib
import re
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "crates/wormhole/cuda-api/cuda.api"
WHEELS = {"12": "nvidia-cuda-runtime-cu12==12.9.79", "13": "nvidia-cuda-runtime==13.5.37"}
# (description, header, the header's declaration macro, library, wheels by major)
LIBS = [
    ("cuda.api", "cuda_runtime_api.h", "CUDARTAPI", "libcudart.so.{major}", WHEELS),
    ("cublas.api", "cublas_api.h", "CUBLASWINAPI", "libcublas.so.{major}",
     {"12": "nvidia-cublas-cu12==12.9.3.13", "13": "nvidia-cublas==13.10.0.20"}),
    ("curand.api", "curand.h", "CURANDAPI", "libcurand.so.10",
     {"12": "nvidia-curand-cu12==10.3.10.19", "13": "nvidia-curand==10.4.5.25"}),
    ("cublaslt.api", "cublasLt.h", "CUBLASWINAPI", "libcublasLt.so.{major}",
     {"13": "nvidia-cublas==13.10.0.20"}),
    # cuSOLVER's soname is its own major (11 with CUDA 12, 12 with CUDA 13).
    ("cusolver.api", "cusolverDn.h", "CUSOLVERAPI", "libcusolver.so.1*",
     {"12": "nvidia-cusolver-cu12==11.7.5.82", "13": "nvidia-cusolver==12.0.4.66"}),
    # The driver is not on PyPI: header only (cuda.h ships with nvcc's wheel),
    # e.g. --api driver.api --include .../nvidia/cu13/include.
    ("driver.api", "cuda.h", "CUDAAPI", "libcuda.so.1", {}),
]
# Declared for nvcc's generated host code, not in cuda_runtime_api.h, or
# (the profiler) in cuda_profiler_api.h, which the runtime wheels lack:
# checked against the library only.
NVCC_ONLY = re.compile(r"^(__cuda|cudaProfilerSt)")
# Entry points whose header name differs (CUDA 12's headers #define
# cudaGetDeviceProperties to the _v2 symbol), and the majors exporting them.
ALIASES = {"cudaGetDeviceProperties_v2": ("cudaGetDeviceProperties", {"12"}),
           "cuDevicePrimaryCtxRelease_v2": ("cuDevicePrimaryCtxRelease", {"12", "13"})}
# Entry points only some majors declare and export (CUDA 12's versioned
# capture-info forms); the others are not checked against them.
ONLY_IN = {"cudaStreamGetCaptureInfo_v2": {"12"}, "cudaStreamGetCaptureInfo_v3": {"12"}}
# Entry points described with one major's parameters whose symbol takes fewer
# in another (the client reads only those there): major -> count.
ARITY = {"cudaStreamGetCaptureInfo": {"12": 3}, "cudaGraphNodeGetDependencies": {"12": 3}}


def described(api=API):
    """(name, parameter count, attributes) of every `fn` in a description."""
    text = re.sub(r"#.*", "", api.read_text())
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


def declared(header, macro="CUDARTAPI"):
    """name -> parameter count, from a header's `MACRO name(...)` declarations."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    out = {}
    for m in re.finditer(macro + r"\s+(\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        params = re.sub(r"\([^()]*\)", "", m.group(2)).strip()  # drop __dv(x)
        n = 0 if params in ("", "void") else params.count(",") + 1
        out[m.group(1)] = n
    return out


def exported(lib):
    """Versioned dynamic symbols of a shared library."""
    r = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True, check=True)
    return {f.split()[-1] for f in r.stdout.splitlines() if "@@" in f}


def fetch(cache):
    """(description, header directory, library) for every library and major."""
    cache.mkdir(parents=True, exist_ok=True)
    found = []
    for api, header, _, libname, wheels in LIBS:
        for major, req in wheels.items():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", req, "-d", str(cache)], check=True)
            wheel = next(cache.glob(req.replace("-", "_").replace("==", "-") + "-*.whl"))
            dest = cache / f"{api}-{major}"
            if not dest.exists():
                with zipfile.ZipFile(wheel) as z:
                    z.extractall(dest)
            inc = next(dest.rglob(header)).parent
            lib = next(dest.rglob(libname.format(major=major)))
            found.append((api, inc, lib))
    return found


def check(inc, lib, api="cuda.api"):
    _, header, macro, _, _ = next(entry for entry in LIBS if entry[0] == api)
    decl = declared(inc / header, macro)
    syms = exported(lib) if lib else set()
    soname = lib.name if lib else ""
    errors = 0
    major = soname.rsplit(".", 1)[-1]
    funcs = described(API.parent / api)
    for name, n, attrs in funcs:
        hname, majors = ALIASES.get(name, (name, None))
        if name in ONLY_IN and major not in ONLY_IN[name]:
            continue
        n = ARITY.get(name, {}).get(major, n)
        if not NVCC_ONLY.match(name):
            if hname not in decl:
                print(f"  {name}: not declared in {inc}/{header}")
                errors += 1
            elif decl[hname] != n:
                print(f"  {name}: {n} parameters described, {decl[hname]} declared")
                errors += 1
        if majors is not None and major not in majors:
            continue
        if lib and f"{name}@@{soname}" not in syms:
            print(f"  {name}: not exported by {lib} as {name}@@{soname}")
            errors += 1
        # Its per-thread default stream name (`ptds`/`ptsz`), which the
        # stand-in exports too.
        variant = re.search(r"\bpt(ds|sz)\b", attrs)
        if lib and variant and f"{name}_{variant.group(0)}@@{soname}" not in syms:
            print(f"  {name}: no {name}_{variant.group(0)}@@{soname} in {lib}")
            errors += 1
    print(f"{api} against {inc}: {len(funcs)} functions checked, {errors} problems")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--include", type=pathlib.Path)
    ap.add_argument("--lib", type=pathlib.Path)
    ap.add_argument("--api", default="cuda.api", help="the description to check with --include")
    ap.add_argument("--fetch", action="store_true")
    ap.add_argument("--cache", type=pathlib.Path, default=pathlib.Path("/tmp/wormhole-cuda-headers"))
    a = ap.parse_args()
    found = fetch(a.cache) if a.fetch else [(a.api, a.include, a.lib)]
    if not found or found[0][1] is None:
        ap.error("give --include (and --lib) or --fetch")
    sys.exit(1 if sum(check(i, l, api) for api, i, l in found) else 0)


if __name__ == "__main__":
    main()

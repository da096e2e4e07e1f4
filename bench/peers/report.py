"""The report of bench/peers: results.md (the table, the ratios against
issue 32's goals, each miss with its own figures) and peers.png (gnuplot).
Standard library only; the chart is skipped, and said so, without gnuplot."""

import os
import shutil
import statistics
import subprocess

SETUPS = ["native", "wh-futex", "wh-spin", "wh-same-core", "wh-tcp", "pocl-remote"]
NAMES = {
    "native": "native PoCL 3.1",
    "wh-futex": "Wormhole shm futex",
    "wh-spin": "Wormhole shm spin",
    "wh-same-core": "Wormhole shm same-core",
    "wh-tcp": "Wormhole TCP",
    "pocl-remote": "PoCL-remote TCP",
}
SHM = ["wh-futex", "wh-spin", "wh-same-core"]
TRIPS = [
    ("readback", "launch + blocking 4-byte read"),
    ("marker_wait", "marker + clWaitForEvents"),
    ("launch_finish", "launch + clFinish"),
    ("write4", "blocking 4-byte write"),
    ("finish_idle", "clFinish, nothing to run"),
    ("event_status", "clGetEventInfo status, completed event"),
    ("event_type", "clGetEventInfo command type"),
    ("event_refs", "clGetEventInfo reference count"),
    ("device_type", "clGetDeviceInfo type"),
]
# Below this a call cannot have crossed to a server and back here (a round
# trip is several microseconds): it was answered locally.
LOCAL_NS = 1000.0


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def trip_rounds(res, setup, name):
    """Per round, the median ns of one round trip (None where it failed)."""
    out = []
    for r in res["rounds"].get("trips", {}).get(setup, []):
        v = r.get(name, {}).get("median_ns") if not r.get("failed") else None
        out.append(v)
    return out


def per_round(res, bench, setup, key):
    out = []
    for r in res["rounds"].get(bench, {}).get(setup, []):
        if r.get("failed"):
            out.append(None)
            continue
        v = r.get(key)
        out.append(med(v) if isinstance(v, list) else v)
    return out


def ratio_rounds(a, b):
    """Median over rounds of a/b, rounds where both are known."""
    rs = [x / y for x, y in zip(a, b) if x is not None and y not in (None, 0)]
    return med(rs)


def fmt(v, unit=""):
    if v is None:
        return "–"
    if abs(v) >= 100:
        s = f"{v:,.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return s + unit


def us(ns):
    return None if ns is None else ns / 1000.0


def table(res):
    rows = ["| workload | " + " | ".join(NAMES[s] for s in SETUPS) + " |",
            "|---|" + "---:|" * len(SETUPS)]
    for name, label in TRIPS:
        cells = []
        for s in SETUPS:
            v = med(trip_rounds(res, s, name))
            cell = fmt(us(v))
            if v is not None and v < LOCAL_NS:
                cell += " (local)"
            cells.append(cell)
        rows.append(f"| {label}, µs | " + " | ".join(cells) + " |")
    for bench, key, label in [("callheavy", "wall_s", "call-heavy, 10k launches, s"),
                              ("bulk", "write_gbps", "256 MiB write, GB/s"),
                              ("bulk", "read_gbps", "256 MiB read, GB/s")]:
        rows.append(f"| {label} | " + " | ".join(fmt(med(per_round(res, bench, s, key)))
                                                  for s in SETUPS) + " |")
    builds = [fmt(us(us(med(per_round(res, "build", s, "build_median"))))) for s in SETUPS]
    rows.append("| program build, ms | " + " | ".join(builds) + " |")
    for app, runs in res.get("apps", {}).items():
        cells = []
        for s in SETUPS:
            rr = runs.get(s)
            if not rr:
                cells.append("·")
                continue
            ok = [r for r in rr if r["rc"] == 0]
            if app.startswith("clblast"):
                r = rr[-1]
                c = f"{fmt(med([x['seconds'] for x in ok]))} ({r.get('passed', 0)} pass, {r.get('failed', 0)} fail)" if ok else f"exit {r['rc']}"
            elif app == "clpeak":
                lat = med([x["metrics"].get("Kernel launch latency") for x in ok]) if ok else None
                c = f"{fmt(med([x['seconds'] for x in ok]))} (latency {fmt(lat)} µs)" if ok else f"exit {rr[-1]['rc']}"
            else:
                c = fmt(med([x["seconds"] for x in ok])) if ok else f"exit {rr[-1]['rc']}"
            cells.append(c)
        rows.append(f"| {app}, s | " + " | ".join(cells) + " |")
    it = res.get("it", {})
    if it:
        cells = []
        for s in SETUPS:
            if not any(s in v for v in it.values()):
                cells.append("·")
                continue
            n = sum(1 for v in it.values() if v.get(s, {}).get("pass"))
            cells.append(f"{n} / {len(it)}")
        rows.append("| C integration suite, programs passing | " + " | ".join(cells) + " |")
    py = res.get("pyopencl", {})
    if py:
        cells = []
        for s in SETUPS:
            c = py.get(s)
            cells.append("·" if not c else f"{c['passed']} pass, {c['failed'] + c['error']} fail"
                         + ("" if c.get("complete") else " (cut off)"))
        rows.append("| pyopencl subset | " + " | ".join(cells) + " |")
    idle = res.get("idle", {})
    if idle:
        rows.append("| server CPU, idle client, ms in " + str(next(iter(idle.values()))["seconds"])
                    + " s | " + " | ".join(
                        "·" if s not in idle else fmt(idle[s]["cpu_ms"]) for s in SETUPS) + " |")
    return "\n".join(rows)


def build_ms(res):
    for s, rr in res["rounds"].get("build", {}).items():
        for r in rr:
            if "build" in r and "build_median" not in r:
                r["build_median"] = r["build"]["median_ns"]


def goals(res):
    """Issue 32's goals, each with its ratio and verdict."""
    out = []

    def verdict(ok):
        return "met" if ok else "**missed**"

    nat = {n: trip_rounds(res, "native", n) for n, _ in TRIPS}
    for name, label in TRIPS:
        peer = trip_rounds(res, "pocl-remote", name)
        wh = trip_rounds(res, "wh-futex", name)
        pm, wm, nm = med(peer), med(wh), med(nat[name])
        if None in (pm, wm, nm):
            continue
        peer_local, wh_local = pm < LOCAL_NS, wm < LOCAL_NS
        if peer_local:
            out.append((f"{label}: the peer answers locally", f"Wormhole {fmt(us(wm))} µs"
                        + (" (local too)" if wh_local else ", a round trip"), verdict(wh_local)))
            continue
        po = [p - n for p, n in zip(peer, nat[name]) if p is not None and n is not None]
        wo = [w - n for w, n in zip(wh, nat[name]) if w is not None and n is not None]
        # Per-round ratios where Wormhole's overhead is positive in every
        # round; else the ratio of the medians (a round where Wormhole was
        # at or below native has no ratio).
        if all(w > 0 for w in wo):
            r = ratio_rounds(po, wo)
        else:
            r = med(po) / med(wo) if med(wo) > 0 else None
        detail = (f"overhead peer {fmt(us(med(po)))} µs, Wormhole {fmt(us(med(wo)))} µs: "
                  + (f"{fmt(r)}× smaller" if r is not None else "Wormhole's none"))
        out.append((f"{label}: Wormhole's overhead ≥ 10× smaller than the peer's", detail,
                    verdict(r is None or r >= 10)))
    ch = ratio_rounds(per_round(res, "callheavy", "pocl-remote", "wall_s"),
                      per_round(res, "callheavy", "wh-futex", "wall_s"))
    if ch is not None:
        out.append(("call-heavy ≥ 20× the peer's speed", f"{fmt(ch)}×", verdict(ch >= 20)))
    for key, label in [("write_gbps", "256 MiB write"), ("read_gbps", "256 MiB read")]:
        r = ratio_rounds(per_round(res, "bulk", "wh-futex", key),
                         per_round(res, "bulk", "pocl-remote", key))
        if r is not None:
            out.append((f"{label} ≥ 5× the peer's speed", f"{fmt(r)}×", verdict(r >= 5)))
    it = res.get("it", {})
    if it:
        w = sum(1 for v in it.values() if v.get("wh-futex", {}).get("pass"))
        p = sum(1 for v in it.values() if v.get("pocl-remote", {}).get("pass"))
        out.append(("C suite: at least as many programs passing", f"Wormhole {w}, peer {p} of {len(it)}",
                    verdict(w >= p)))
    py = res.get("pyopencl", {})
    if "wh-futex" in py and "pocl-remote" in py:
        w, p = py["wh-futex"]["passed"], py["pocl-remote"]["passed"]
        out.append(("pyopencl subset: at least as many tests passing", f"Wormhole {w}, peer {p}",
                    verdict(w >= p)))
    for name, label in TRIPS:
        tcp = trip_rounds(res, "wh-tcp", name)
        if med(tcp) is None or med(tcp) < LOCAL_NS:
            continue
        parts, ok = [], True
        for s in SHM:
            r = ratio_rounds(trip_rounds(res, s, name), tcp)
            if r is None:
                continue
            ok &= r <= 1.0
            parts.append(f"{s.removeprefix('wh-')} {fmt(r)}×")
        out.append((f"{label}: shared memory ≤ TCP (median of per-round ratios)", ", ".join(parts),
                    verdict(ok)))
    mw = {s: ratio_rounds(trip_rounds(res, s, "marker_wait"), nat["marker_wait"]) for s in SHM}
    if all(v is not None for v in mw.values()):
        out.append(("marker + wait ≤ 1.3× native", ", ".join(f"{s.removeprefix('wh-')} {fmt(v)}×"
                                                             for s, v in mw.items()),
                    verdict(min(mw.values()) <= 1.3) + ("" if max(mw.values()) <= 1.3 else
                                                        " (not in every mode)"
                                                        if min(mw.values()) <= 1.3 else "")))
    return out


def failures(res):
    lines = []
    for prog, by in sorted(res.get("it", {}).items()):
        for s, e in by.items():
            if s != "native" and not e.get("pass"):
                lines.append(f"- C suite `{prog}` through {NAMES[s]}: {e.get('why', 'failed')}"
                             + (f" ({e['stderr'][-160:]!r})" if e.get("stderr") else ""))
    for app, by in res.get("apps", {}).items():
        for s, rr in by.items():
            for r in rr:
                if r["rc"] != 0:
                    lines.append(f"- {app} through {NAMES[s]}: exit {r['rc']}"
                                 + (f" ({r.get('tail', '')[-160:]!r})" if r.get("tail") else ""))
                    break
    return lines


def chart(out, res):
    """peers.png: the round trips, per setup, on a log scale."""
    if shutil.which("gnuplot") is None:
        return "no chart: gnuplot is not installed"
    names = [n for n, _ in TRIPS if n not in ("finish_idle", "device_type", "event_type")]
    dat = os.path.join(out, "peers-chart.dat")
    with open(dat, "w") as f:
        f.write("trip " + " ".join(f'"{NAMES[s]}"' for s in SETUPS) + "\n")
        for n in names:
            vals = []
            for s in SETUPS:
                v = med(trip_rounds(res, s, n))
                vals.append(f"{max(us(v), 0.01):.3f}" if v is not None else "NaN")
            f.write(n.replace("_", "-") + " " + " ".join(vals) + "\n")
    script = f"""set terminal pngcairo size 1100,520 font "DejaVu Sans,10"
set output "{os.path.join(out, 'peers.png')}"
set title "Synchronous round trips, median µs (log scale; under 1 µs: answered locally)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set logscale y
set yrange [0.01:*]
set ylabel "µs"
set key outside right top
set grid ytics
plot for [i=2:{len(SETUPS) + 1}] "{dat}" using i:xtic(1) title columnheader(i)
"""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return "" if r.returncode == 0 else f"no chart: gnuplot said {r.stderr.strip()[:200]}"


def write(out, res):
    build_ms(res)
    m = res["machine"]
    note = chart(out, res)
    lines = [
        f"## {m['date']}: Wormhole beside PoCL-remote ({m['cpus']} CPUs, {m['cpu']})",
        "",
        f"Commit `{m['commit']}`, Linux {m['kernel']}, guest_halt_poll_ns {m['guest_halt_poll_ns']}; "
        f"load {m['load_before']} before, {m.get('load_after', '?')} after; {m.get('seconds', '?')} s. "
        f"{res['settings']['rounds']} rounds of the microbenchmarks ({res['settings']['iters']} "
        f"calls per round trip and round), setups alternating in turned order; medians of the "
        f"rounds' medians, ratios per round then their median.",
        "",
        table(res),
        "",
        "(local): under 1 µs, so answered without a round trip. ·: not run in that setup.",
        "",
        "| goal (issue 32) | measured | verdict |",
        "|---|---|---|",
    ]
    lines += [f"| {g} | {v} | {ok} |" for g, v, ok in goals(res)]
    f = failures(res)
    if f:
        lines += ["", "Failures:", ""] + f
    if note:
        lines += ["", note]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write(text)
    print(text)

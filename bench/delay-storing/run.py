#!/usr/bin/env python3
"""Delay storing, measured (run by bench/delay-storing/run.sh).

(a) room for everyone: a server with residency (delay storing, a budget
    that every tenant fits in) against a plain one, side by side, on
    bench/wormhole/whbench.c's call-heavy workload, a launch-and-read round
    trip and null calls;
(b) 20 tenants each holding a quarter of the budget: one active at a time
    (the notebook pattern: a random tenant runs a session of cells), and
    round-robin among 4; throughput and bytes moved under delay storing and
    under the eager baseline, and how many tenants `residency = off` (the
    budget a hard limit) serves at all;
(c) the paper's figure: the cost of resuming a tenant that was not
    displaced (another tenant ran in between, with room for both).

Bytes moved are the server's own count (its SIGUSR1 report: bytes saved to
the host store plus bytes restored). Every tenant checks its data at the end
of each run. Prints a table and writes bench/out/delay-storing.{md,json}.
"""

import argparse
import json
import os
import platform
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import bounds

MiB = 1 << 20


class Server:
    """A wormhole-server on a private socket."""

    def __init__(self, binary, work, name, args, env=None):
        self.sock = os.path.join(work, f"{name}.sock")
        self.log = os.path.join(work, f"{name}.log")
        env = dict(os.environ, WORMHOLE_LOG="warn", **(env or {}))
        self.proc = subprocess.Popen(
            [binary, "--quiet", "--socket", self.sock] + args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
            env=env,
        )
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            time.sleep(0.05)
        raise RuntimeError(f"server {name} did not start: {open(self.log).read()}")

    def report(self):
        """The ledger's totals, from the listener's report."""
        text = open(self.log).read()
        seen = text.count("residency: device budget")
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(100):
            time.sleep(0.05)
            lines = [l for l in open(self.log).read().splitlines() if "residency: device budget" in l]
            if len(lines) > seen:
                line = lines[-1]
                num = lambda k: int(re.search(k + r" (\d+)", line).group(1))
                return {
                    "saved": num("freed \\d+ saved"),
                    "restored": num("bytes granted \\d+ restored"),
                    "asks": num("asks"),
                    "busy": num("busy"),
                    "switches": num("switches"),
                    "refusals": num("refusals"),
                    "used": num("bytes,"),
                }
        raise RuntimeError("no residency report")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def client_env(icd_dir, server):
    return dict(
        os.environ,
        OCL_ICD_VENDORS=icd_dir,
        WORMHOLE_SERVER=f"unix:{server.sock}",
    )


def api_server(o, work, name, args):
    """A server for (b) and (c): OpenCL's, or with --api cuda one whose
    ledger counts CUDA's memory, on the libraries in --cuda-libs."""
    if o.api == "cuda":
        return Server(o.server, work, name,
                      args + ["--residency-api", "cuda", "--cuda-runtime",
                              os.path.join(o.cuda_libs, "libcudart.so.13")],
                      env={"LD_LIBRARY_PATH": o.cuda_libs})
    return Server(o.server, work, name, args)


def api_env(o, server):
    """A tenant's environment: the ICD, or Wormhole's CUDA stand-ins."""
    if o.api == "cuda":
        return dict(os.environ, LD_LIBRARY_PATH=o.client_libs, WORMHOLE_SERVER=server.sock)
    return client_env(o.icd, server)


class Tenant:
    """One tenant process (tenant.c), driven over its stdin and stdout."""

    def __init__(self, binary, env, mib, nbuf):
        self.proc = subprocess.Popen(
            [binary, str(mib), str(nbuf)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        first = self.line(120)
        self.ready = first.startswith("ready")
        self.status = first

    def line(self, limit=120):
        r, _, _ = select.select([self.proc.stdout], [], [], limit)
        if not r:
            raise RuntimeError("a tenant did not answer in time")
        l = self.proc.stdout.readline()
        if not l:
            raise RuntimeError(f"a tenant ended: {self.proc.stderr.read()}")
        return l.strip()

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.line()

    def cell(self, r, w):
        a = self.ask(f"cell {r} {w}")
        if not a.startswith("ok"):
            raise RuntimeError(f"cell: {a}")
        return int(a.split()[1])

    def poke(self, i):
        a = self.ask(f"poke {i}")
        if not a.startswith("ok"):
            raise RuntimeError(f"poke: {a}")
        return int(a.split()[1])

    def verify(self):
        a = self.ask("verify")
        if not a.startswith("verified"):
            raise RuntimeError(f"verify: {a}")

    def quit(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tenants_of(server_pid):
    """The server's tenant processes now."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            cmd = open(f"/proc/{d}/cmdline", "rb").read()
        except (OSError, ValueError):
            continue
        if ppid == server_pid and cmd.endswith(b"tenant\0"):
            pids.append(int(d))
    return pids


def cpu_ns(pid):
    """Time every thread of `pid` ran, in nanoseconds (schedstat)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def callheavy_cpu(o, server, env):
    """whbench's call-heavy loop with the handshake: wall time per launch,
    and the CPU its tenant spent per launch (every thread, from
    schedstat), which a loaded machine disturbs far less than wall time."""
    p = subprocess.Popen([o.whbench, "callheavy", str(o.launches), "100"],
                         env=dict(env, WH_HANDSHAKE="1"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        assert p.stdout.readline().strip() == "READY"
        ts = tenants_of(server.proc.pid)
        if len(ts) != 1:
            raise RuntimeError(f"expected one tenant, found {ts}")
        c0 = cpu_ns(ts[0])
        p.stdin.write("\n")
        p.stdin.flush()
        result = None
        for l in p.stdout:
            if l.startswith("RESULT "):
                result = json.loads(l[7:])
            if l.strip() == "HOLD":
                break
        c1 = cpu_ns(ts[0])
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
    return result["wall_s"] / o.launches * 1e9, (c1 - c0) / o.launches


def whbench(args, binary, env):
    out = subprocess.run([binary] + args, env=env, capture_output=True, text=True, timeout=600)
    for l in out.stdout.splitlines():
        if l.startswith("RESULT "):
            return json.loads(l[7:])
    raise RuntimeError(f"whbench {args}: {out.stderr}")


def overhead(o, work):
    """(a): the same workloads through a plain server and through one with
    delay storing whose budget everyone fits in, alternately."""
    plain = Server(o.server, work, "plain", [])
    res = Server(o.server, work, "resident", ["--oversubscribe", "--device-memory", "8G"])
    keys = ("callheavy", "callheavy_cpu", "readback", "nullcall")
    runs = {"plain": {k: [] for k in keys}, "delay": {k: [] for k in keys}}
    try:
        for i in range(o.rounds):
            # Back to back, in turns first: on a shared machine the load
            # changes between pairs more than within one.
            pair = (("plain", plain), ("delay", res))
            for name, s in (pair if i % 2 == 0 else pair[::-1]):
                env = client_env(o.icd, s)
                wall, cpu = callheavy_cpu(o, s, env)
                runs[name]["callheavy"].append(wall)
                runs[name]["callheavy_cpu"].append(cpu)
                rb = whbench(["readback", "2000"], o.whbench, env)
                runs[name]["readback"].append(rb["round"]["median_ns"])
                nc = whbench(["nullcall", "20000"], o.whbench, env)
                key = next(k for k in nc if k != "bench")
                runs[name]["nullcall"].append(nc[key]["median_ns"])
        moved = res.report()
    finally:
        plain.stop()
        res.stop()
    out = {}
    for k in keys:
        p, d = statistics.median(runs["plain"][k]), statistics.median(runs["delay"][k])
        ratios = sorted(b / a for a, b in zip(runs["plain"][k], runs["delay"][k]))
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        out[k] = {"plain_ns": p, "delay_ns": d, "ratio": statistics.median(ratios),
                  "ratio_q1": q[0], "ratio_q3": q[2],
                  "plain_runs": runs["plain"][k], "delay_runs": runs["delay"][k]}
    out["bytes_moved"] = moved["saved"] + moved["restored"]
    # The hooks alone, in one process: what a call-heavy launch (a scalar
    # argument set, then the launch) pays for residency when nothing moves.
    h = subprocess.run([o.wh_bench, "residency-hooks"], capture_output=True, text=True, timeout=600)
    hooks = next(json.loads(l[7:]) for l in h.stdout.splitlines() if l.startswith("RESULT "))
    extra = (hooks["launch_ns"] - hooks["launch_without_ns"]) + (hooks["set_arg_ns"] - hooks["set_arg_without_ns"])
    out["hooks"] = dict(hooks, per_launch_ns=extra,
                        of_wall=extra / out["callheavy"]["plain_ns"],
                        of_tenant_cpu=extra / out["callheavy_cpu"]["plain_ns"])
    return out


def masks(rng, nbuf, reads, whole):
    """A cell's buffers: `reads` random ones read (all with `whole`), one of
    them updated."""
    if whole:
        r = list(range(nbuf))
    else:
        r = rng.sample(range(nbuf), reads)
    w = rng.choice(r)
    return sum(1 << b for b in r), 1 << w


def sharing(o, work, policy, pattern, whole):
    """(b): 20 tenants of a quarter of the budget each, under `policy`;
    `pattern` says who runs when."""
    budget = o.budget_mib
    args = ["--device-memory", f"{budget}M"]
    if policy != "off":
        args = ["--oversubscribe", "--residency", policy] + args
    s = api_server(o, work, f"{policy}-{pattern}{'-whole' if whole else ''}", args)
    tenants = []
    try:
        env = api_env(o, s)
        for _ in range(o.tenants):
            t = Tenant(o.tenant, env, budget // 4, o.nbuf)
            tenants.append(t)
        served = [t for t in tenants if t.ready]
        result = {"policy": policy, "pattern": pattern, "whole": whole,
                  "served": len(served), "tenants": len(tenants),
                  "refusals": [t.status for t in tenants if not t.ready][:1]}
        if policy == "off":
            return result
        rng = random.Random(o.seed)
        if pattern == "notebook":
            plan = []
            for _ in range(o.sessions):
                t = rng.randrange(len(tenants))
                plan += [(t, masks(rng, o.nbuf, 2, whole)) for _ in range(o.cells)]
        else:
            # One round first, not measured, in which the four come in
            # whole (every buffer read), under either policy; what is
            # measured is the steady state.
            for t in range(4):
                tenants[t].cell((1 << o.nbuf) - 1, 0)
            plan = [(t, masks(rng, o.nbuf, 2, whole)) for _ in range(o.rounds_rr) for t in range(4)]
        before = s.report()
        t0 = time.monotonic()
        for t, (r, w) in plan:
            tenants[t].cell(r, w)
        wall = time.monotonic() - t0
        after = s.report()
        for t in tenants:
            t.verify()
        if pattern == "notebook" and o.api == "opencl":
            flat = [(t, r, w) for t, (r, w) in plan]
            result["plan_allows"] = bounds.allows(flat, len(tenants), o.nbuf,
                                                  (budget // 4) * MiB // o.nbuf, budget * MiB)
        result.update({
            "cells": len(plan),
            "wall_s": wall,
            "cells_per_s": len(plan) / wall,
            "bytes_saved": after["saved"] - before["saved"],
            "bytes_restored": after["restored"] - before["restored"],
            "asks": after["asks"] - before["asks"],
        })
        result["bytes_moved"] = result["bytes_saved"] + result["bytes_restored"]
        return result
    finally:
        for t in tenants:
            t.quit()
        s.stop()


def resume(o, work, policy):
    """(c): tenant A resumes after tenant B ran, with room for both (`off`:
    a server without residency, for what another tenant's run costs
    anyway)."""
    budget = o.budget_mib
    args = [] if policy == "off" else ["--oversubscribe", "--residency", policy,
                                       "--device-memory", f"{budget}M"]
    s = api_server(o, work, f"resume-{policy}", args)
    a = b = None
    try:
        env = api_env(o, s)
        a = Tenant(o.tenant, env, budget // 4, o.nbuf)
        b = Tenant(o.tenant, env, budget // 4, o.nbuf)
        for i in range(o.nbuf):
            a.poke(i)
        steady, after_other = [], []
        report = (lambda: {"saved": 0, "restored": 0}) if policy == "off" else s.report
        before = report()
        for _ in range(o.resumes):
            a.poke(0)
            steady.append(a.poke(0))
            b.poke(0)
            time.sleep(0.02)
            after_other.append(a.poke(0))
        after = report()
        a.verify()
        b.verify()
        return {
            "policy": policy,
            "steady_ns": statistics.median(steady),
            "resume_ns": statistics.median(after_other),
            "bytes_moved_per_resume": (after["saved"] - before["saved"] + after["restored"]
                                       - before["restored"]) / o.resumes,
        }
    finally:
        for t in (a, b):
            if t:
                t.quit()
        s.stop()


def fmt_bytes(n):
    return f"{n / MiB:,.0f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--api", choices=("opencl", "cuda"), default="opencl",
                    help="whose memory is shared: (b) and (c) only for cuda")
    ap.add_argument("--icd", help="folder with wormhole.icd (opencl)")
    ap.add_argument("--cuda-libs", help="the server's CUDA libraries (cuda): NVIDIA's, or the CPU stand-in's")
    ap.add_argument("--client-libs", help="Wormhole's CUDA stand-ins for the tenants (cuda)")
    ap.add_argument("--tenant", required=True)
    ap.add_argument("--whbench", help="(a), opencl")
    ap.add_argument("--wh-bench", help="the wh-bench binary ((a), opencl)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-mib", type=int, default=256)
    ap.add_argument("--tenants", type=int, default=20)
    ap.add_argument("--nbuf", type=int, default=8)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--cells", type=int, default=3)
    ap.add_argument("--rounds-rr", type=int, default=12)
    ap.add_argument("--resumes", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=15, help="(a): pairs of runs")
    ap.add_argument("--launches", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--only", default="abc")
    o = ap.parse_args()
    if o.api == "cuda":
        if not (o.cuda_libs and o.client_libs):
            ap.error("--api cuda needs --cuda-libs and --client-libs")
        o.only = o.only.replace("a", "")
    elif not (o.icd and o.whbench and o.wh_bench):
        ap.error("--api opencl needs --icd, --whbench and --wh-bench")
    work = tempfile.mkdtemp(prefix="wh-delay-")
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(), "options": vars(o)}
    md = [f"# Delay storing{' (CUDA)' if o.api == 'cuda' else ''}: {res['date']}, {res['machine']}", ""]

    if "a" in o.only:
        a = overhead(o, work)
        res["a"] = a
        md += ["## (a) Room for everyone: residency on (delay storing) vs off", "",
               f"{o.rounds} pairs of runs back to back; medians, and the median (quartiles) of the "
               "pairs' ratios.", "",
               "| workload | off | delay storing | ratio (quartiles) |", "|---|---|---|---|"]
        for k, label in (("callheavy", f"call-heavy ({o.launches} launches), wall per launch"),
                         ("callheavy_cpu", "call-heavy, the tenant's CPU per launch"),
                         ("readback", "launch + blocking read, per round"),
                         ("nullcall", "null call")):
            v = a[k]
            md.append(f"| {label} | {v['plain_ns'] / 1000:.2f} us | {v['delay_ns'] / 1000:.2f} us "
                      f"| {v['ratio']:.3f} ({v['ratio_q1']:.3f}-{v['ratio_q3']:.3f}) |")
        h = a["hooks"]
        md += ["", f"The hooks alone, timed in one process (`wh-bench residency-hooks`, best of three): "
               f"a launch's {h['launch_ns']:.0f} ns (without residency {h['launch_without_ns']:.0f} ns), "
               f"a scalar argument's {h['set_arg_ns']:.0f} ns ({h['set_arg_without_ns']:.0f} ns): "
               f"{h['per_launch_ns']:.0f} ns per call-heavy launch, {h['of_wall'] * 100:.1f} % of its wall time "
               f"and {h['of_tenant_cpu'] * 100:.1f} % of its tenant's CPU time without residency.", "",
               f"Bytes moved with delay storing on: {a['bytes_moved']} (nobody was evicted).", ""]
        print("\n".join(md[-13:]), flush=True)

    if "b" in o.only:
        rows = []
        for pattern, whole in (("notebook", False), ("round-robin-4", False), ("notebook", True)):
            for policy in ("delay", "eager"):
                r = sharing(o, work, policy, pattern, whole)
                rows.append(r)
                print(f"(b) {pattern}{' (whole set)' if whole else ''} {policy}: "
                      f"{r['cells_per_s']:.2f} cells/s, moved {fmt_bytes(r['bytes_moved'])}", flush=True)
        off = sharing(o, work, "off", "notebook", False)
        rows.append(off)
        res["b"] = rows
        md += [f"## (b) {o.tenants} tenants of a quarter of the budget each ({o.budget_mib} MiB budget, "
               f"{o.nbuf} buffers a tenant)", "",
               "| pattern | policy | cells | cells/s | moved | saved | restored | delay vs eager: less moved | faster |",
               "|---|---|---|---|---|---|---|---|---|"]
        for i in range(0, len(rows) - 1, 2):
            d, e = rows[i], rows[i + 1]
            name = d["pattern"] + (" (each cell reads the whole set)" if d["whole"] else "")
            less = e["bytes_moved"] / d["bytes_moved"] if d["bytes_moved"] else float("inf")
            faster = d["cells_per_s"] / e["cells_per_s"]
            for r in (d, e):
                md.append(f"| {name} | {r['policy']} | {r['cells']} | {r['cells_per_s']:.2f} | "
                          f"{fmt_bytes(r['bytes_moved'])} | {fmt_bytes(r['bytes_saved'])} | "
                          f"{fmt_bytes(r['bytes_restored'])} | "
                          + (f"{less:.1f}x | {faster:.2f}x |" if r is d else " | |"))
        md += ["", "Round-robin: after one unmeasured round in which the four come in whole.", "",
               "What each notebook plan allows (`bounds.py`: the run's own cells replayed through "
               "idealised policies, every buffer its own unit, result buffers left out), as eager's "
               "bytes over the policy's:", "",
               "| pattern | eager | delay storing as built (LRU) | clean buffers evicted first | "
               "knowing the future (Belady) |", "|---|---|---|---|---|"]
        for d in rows:
            pa = d.get("plan_allows")
            if d["policy"] != "delay" or not pa:
                continue
            name = d["pattern"] + (" (each cell reads the whole set)" if d["whole"] else "")
            md.append(f"| {name} | {fmt_bytes(pa['eager']['bytes'])} | "
                      + " | ".join(f"{fmt_bytes(pa[k]['bytes'])}, {pa[k]['less_than_eager']:.2f}x"
                                   for k in ("lru", "clean-first", "belady")) + " |")
        md += ["", f"`residency = \"off\"` (the budget a hard limit): {off['served']} of {off['tenants']} "
               f"tenants served; the others were refused ({off['refusals'][0] if off['refusals'] else '-'}).",
               ""]

    if "c" in o.only:
        c = [resume(o, work, p) for p in ("eager", "delay", "off")]
        res["c"] = c
        md += ["## (c) Resuming a tenant that was not displaced (another ran in between, room for both)", "",
               "| policy | command, steady | first command after the other tenant ran | moved per round (the other's switch and the resume) |",
               "|---|---|---|---|"]
        for r in c:
            md.append(f"| {r['policy']} | {r['steady_ns'] / 1000:.0f} us | {r['resume_ns'] / 1000:.0f} us | "
                      f"{fmt_bytes(r['bytes_moved_per_resume'])} |")
        e, d, off = c
        md += ["", f"Resume: eager {e['resume_ns'] / 1000:.0f} us -> delay storing {d['resume_ns'] / 1000:.0f} us "
               f"({(1 - d['resume_ns'] / e['resume_ns']) * 100:.1f} % less); without residency "
               f"{off['resume_ns'] / 1000:.0f} us.", ""]

    text = "\n".join(md)
    print(text)
    os.makedirs(o.out, exist_ok=True)
    name = "delay-storing-cuda" if o.api == "cuda" else "delay-storing"
    with open(os.path.join(o.out, f"{name}.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(o.out, f"{name}.json"), "w") as f:
        json.dump(res, f, indent=1)


def machine():
    cpu = "?"
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                cpu = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Linux {platform.release()}"


if __name__ == "__main__":
    sys.exit(main())

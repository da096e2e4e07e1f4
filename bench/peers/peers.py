#!/usr/bin/env python3
"""Wormhole beside PoCL-remote, side by side in one run (bench/peers/run.sh).

    peers.py run --out DIR [--rounds N] ...   measure, then write the report
    peers.py report --out DIR                 the report again from DIR/results.json

Setups, alternated within every round (the order turns each round, so a
noisy machine hits all alike): native PoCL, Wormhole over shared memory in
each handoff mode, Wormhole over TCP on loopback, PoCL-remote over TCP on
loopback. Every server serves the same device: Debian's PoCL CPU device.
Run inside a network namespace of its own (run.sh does): `pocld` listens on a
port bound to every address. Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402  (bench/peers/report.py)

NATIVE_ICD = os.environ.get("POCL_ICD", "/etc/OpenCL/vendors/pocl.icd")
# Wormhole's setups, by handoff mode; "wh-tcp" is a futex server's TCP port.
WH_MODES = {"wh-futex": "futex", "wh-spin": "spin", "wh-same-core": "same-core"}
SETUPS = ["native", "wh-futex", "wh-spin", "wh-same-core", "wh-tcp", "pocl-remote"]
# The programs of the C integration suite (crates/wormhole/it/tests/opencl.rs
# and event_ends.rs), run natively, through Wormhole and through the peer.
IT_PROGRAMS = [
    "buffers", "images", "programs", "kernels", "events", "gated", "gated_maps", "callbacks",
    "image_host_ptr", "local_answers", "errors", "platform", "large", "info", "waits",
    "event_ends",
]
PYOPENCL_FILES = "test_wrapper.py test_enqueue_copy.py test_arrays_in_structs.py test_clrandom.py"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Servers:
    """The servers of one run: a Wormhole server per handoff mode (the futex
    one on TCP too, for wh-tcp, from a server of its own) and `pocld`."""

    def __init__(self, a, tmp):
        self.tmp = tmp
        self.procs = {}
        env = dict(os.environ, OCL_ICD_VENDORS=NATIVE_ICD)
        for k in list(env):
            if k.startswith("WORMHOLE_") or k.startswith("POCL_REMOTE") or k == "POCL_DEVICES":
                del env[k]
        # Confined tenants read only the system's paths: pyopencl's kernels
        # include headers from its venv and test folder, which a server for
        # pyopencl users is told of (`tenant_paths`), as PoCL-remote's
        # unconfined pocld reads them anyway.
        # In the output folder: tenants run as uids of their own when the
        # server is root, and must read it (the scratch folder is private).
        conf = os.path.join(a.out, "wormhole.toml")
        with open(conf, "w") as f:
            paths = [p for p in (a.pyopencl_venv, a.pyopencl_tests) if p]
            f.write("tenant_paths = [" + ", ".join(json.dumps(os.path.abspath(p)) for p in paths)
                    + "]\n")
        os.chmod(conf, 0o644)
        srv = [os.path.join(a.bin_dir, "wormhole-server"), "--config", conf]
        for setup, mode in WH_MODES.items():
            sock = os.path.join(tmp, f"{setup}.sock")
            self.start(setup, srv + ["--socket", sock, "--handoff", mode, "--quiet"], env)
        self.start("wh-tcp", srv + ["--socket", os.path.join(tmp, "wh-tcp.sock"), "--tcp",
                                    f"127.0.0.1:{a.wh_port}", "--quiet"], env)
        self.start("pocl-remote", [os.path.join(a.peer, "bin", "pocld"), "-a", "127.0.0.1",
                                   "-p", str(a.peer_port)], env)
        deadline = time.time() + 20
        for setup in WH_MODES:
            while not os.path.exists(os.path.join(tmp, f"{setup}.sock")) and time.time() < deadline:
                time.sleep(0.05)
        for port in (a.wh_port, a.peer_port):
            while time.time() < deadline:
                if listening(port):
                    break
                time.sleep(0.1)
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise SystemExit(f"{name}'s server exited at start; see {tmp}/{name}.log")

    def start(self, name, cmd, env):
        out = open(os.path.join(self.tmp, f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def pid(self, setup):
        return self.procs[setup].pid

    def stop(self):
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def listening(port):
    """Whether something listens on TCP `port` (without connecting: a probe
    would be a client to either server)."""
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            return any(int(l.split()[1].split(":")[1], 16) == port and l.split()[3] == "0A"
                       for l in f)
    except (OSError, ValueError, IndexError, StopIteration):
        return False


def client_env(a, setup, tmp, extra=None):
    """The environment a client of `setup` runs in."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("WORMHOLE_") or k.startswith("POCL_REMOTE") or k == "POCL_DEVICES")}
    if setup == "native":
        env["OCL_ICD_VENDORS"] = NATIVE_ICD
    elif setup == "pocl-remote":
        env["OCL_ICD_VENDORS"] = os.path.join(a.peer, "vendors")
        env["POCL_DEVICES"] = "remote"
        env["POCL_REMOTE0_PARAMETERS"] = f"127.0.0.1:{a.peer_port}/0"
    else:
        icd = os.path.join(tmp, "icd")
        os.makedirs(icd, exist_ok=True)
        with open(os.path.join(icd, "wormhole.icd"), "w") as f:
            f.write(os.path.join(a.bin_dir, "libwormhole_opencl.so") + "\n")
        env["OCL_ICD_VENDORS"] = icd
        env["WORMHOLE_SERVER"] = (f"tcp:127.0.0.1:{a.wh_port}" if setup == "wh-tcp"
                                  else "unix:" + os.path.join(tmp, f"{setup}.sock"))
    env.update(extra or {})
    return env


def run(cmd, env, limit, cwd=None):
    """Runs `cmd` to its end or `limit` seconds: (exit code or None, stdout,
    stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, text=True,
                         errors="replace")
    try:
        out, err = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        raise
    return rc, out, err, time.monotonic() - t0


def result_line(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def rotated(items, r):
    k = r % len(items)
    return items[k:] + items[:k]


def measure_rounds(a, tmp, res):
    """The peerbench workloads, every setup in every round."""
    work = [
        ("trips", [str(a.iters)], 120),
        ("callheavy", ["10000", "100"], 120),
        ("bulk", ["256", "1"], 180),
        ("build", ["2"], 180),
    ]
    for r in range(a.rounds):
        for setup in rotated(SETUPS, r):
            env = client_env(a, setup, tmp)
            for name, args, limit in work:
                rc, out, err, secs = run([a.peerbench, name] + args, env, limit)
                got = result_line(out) if rc == 0 else None
                if got is None:
                    log(f"  round {r + 1} {setup} {name}: failed (exit {rc}): {err.strip()[-300:]}")
                    got = {"failed": True}
                res["rounds"].setdefault(name, {}).setdefault(setup, []).append(got)
        log(f"round {r + 1}/{a.rounds} done ({time.monotonic() - a.t0:.0f} s)")


def clpeak_metrics(text):
    """clpeak's "name : value" lines under their section headers."""
    out, section = {}, ""
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"^(.*?)\s*:\s*([0-9.]+)\s*(us|GBPS)?$", s)
        if m and (section or m.group(3)):
            key = f"{section} / {m.group(1)}" if section else m.group(1)
            out[key] = float(m.group(2))
        elif s and not s.startswith(("Platform", "Device", "Driver", "Compute", "Clock")) and ":" not in s:
            section = s.split("(")[0].strip()
    return out


def measure_apps(a, tmp, res):
    """Real programs, unmodified: the demo, clpeak, CLBlast's tests."""
    setups = ["native", "wh-futex", "wh-tcp", "pocl-remote"]
    apps = [
        ("demo", [a.demo], 300),
        ("clpeak", ["clpeak", "--kernel-latency"], 300),
    ] + [(f"clblast {t}", [f"/usr/bin/clblast_test_{t}", "-q"], 600) for t in a.clblast]
    # One untimed run of each first: kernels compiled on first use then
    # come from each setup's compiler cache (PoCL's, or the Wormhole
    # server's own, which outlives a run) in the timed runs alike.
    for setup in setups:
        for name, cmd, limit in apps:
            run(cmd, client_env(a, setup, tmp), limit)
    log(f"apps warmed up ({time.monotonic() - a.t0:.0f} s)")
    for r in range(a.app_rounds):
        for setup in rotated(setups, r):
            env = client_env(a, setup, tmp)
            for name, cmd, limit in apps:
                rc, out, err, secs = run(cmd, env, limit)
                text = re.sub(r"\x1b\[[0-9;]*m", "", out + err)
                entry = {"rc": rc, "seconds": round(secs, 3)}
                if name.startswith("clblast"):
                    m = re.search(r"(\d+) test\(s\) passed", text)
                    f = re.search(r"(\d+) test\(s\) failed", text)
                    entry["passed"] = int(m.group(1)) if m else 0
                    entry["failed"] = int(f.group(1)) if f else 0
                elif name == "clpeak":
                    entry["metrics"] = clpeak_metrics(text)
                if rc != 0:
                    entry["tail"] = text.strip()[-400:]
                    log(f"  apps {setup} {name}: exit {rc}")
                res["apps"].setdefault(name, {}).setdefault(setup, []).append(entry)
        log(f"apps round {r + 1}/{a.app_rounds} done ({time.monotonic() - a.t0:.0f} s)")


def cpu_ticks(pid):
    """CPU ticks (user + system) of `pid` and every process below it."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                fields = st[st.rindex(")") + 2:].split()
                children.setdefault(int(fields[1]), []).append((int(d), int(fields[11]) + int(fields[12])))
            except (OSError, ValueError):
                continue
    total, todo = 0, [pid]
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        fields = st[st.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])
    except (OSError, ValueError):
        return 0
    while todo:
        p = todo.pop()
        for c, t in children.get(p, []):
            total += t
            todo.append(c)
    return total


def measure_idle(a, tmp, servers, res):
    """Each server's CPU while a client holds a context and sleeps."""
    seconds = a.idle_seconds
    clients = {}
    for setup in ["wh-futex", "wh-spin", "wh-same-core", "wh-tcp", "pocl-remote"]:
        clients[setup] = subprocess.Popen([a.peerbench, "idle", str(seconds + 4)],
                                          env=client_env(a, setup, tmp), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True, start_new_session=True)
    ready = {}
    for setup, p in clients.items():
        line = p.stdout.readline()
        ready[setup] = line.startswith("READY")
    time.sleep(1)
    hz = os.sysconf("SC_CLK_TCK")
    t0 = {s: cpu_ticks(servers.pid(s)) for s in clients}
    time.sleep(seconds)
    t1 = {s: cpu_ticks(servers.pid(s)) for s in clients}
    for setup, p in clients.items():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
        res["idle"][setup] = {
            "connected": ready[setup],
            "cpu_ms": round((t1[setup] - t0[setup]) * 1000 / hz, 1),
            "seconds": seconds,
        }
    log(f"idle done ({time.monotonic() - a.t0:.0f} s)")


def measure_it(a, tmp, res):
    """The C integration suite: each program natively, through Wormhole and
    through the peer; a pass is a clean exit with the native run's lines."""
    for prog in IT_PROGRAMS:
        binary = os.path.join(a.it_dir, prog)
        if not os.path.exists(binary):
            continue
        outs = {}
        limit = a.it_limit
        for setup in ["native", "wh-futex", "pocl-remote"]:
            rc, out, err, secs = run([binary], client_env(a, setup, tmp), limit)
            if setup == "native":
                # A remoted run that takes far longer than the native one
                # has hung: twice native and 10 s more.
                limit = min(a.it_limit, 10 + 2 * secs)
            lines = [l for l in out.splitlines() if not l.startswith("~")]
            outs[setup] = (rc, lines, err)
        nrc, nlines, _ = outs["native"]
        for setup, (rc, lines, err) in outs.items():
            ok = rc == 0 and lines == nlines and bool(lines) and lines[-1].endswith(": done")
            entry = {"pass": ok, "rc": rc}
            if not ok and setup != "native":
                diff = next((i for i in range(max(len(lines), len(nlines)))
                             if i >= len(lines) or i >= len(nlines) or lines[i] != nlines[i]), None)
                entry["why"] = ("timed out" if rc is None else f"exit {rc}" if rc != 0 else
                                f"line {diff + 1 if diff is not None else '?'} differs")
                if rc not in (0, None):
                    entry["stderr"] = err.strip()[-300:]
            res["it"].setdefault(prog, {})[setup] = entry
    log(f"C suite done ({time.monotonic() - a.t0:.0f} s)")


def measure_pyopencl(a, tmp, res):
    """pyopencl's test subset (scripts/pyopencl-suite.sh's) per setup."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import pyopencl_suite  # noqa: E402

    py = os.path.join(a.pyopencl_venv, "bin", "python")
    setups = ["native", "wh-futex", "pocl-remote"]
    for i, setup in enumerate(setups):
        # What is left of the budget, shared by the runs still to come.
        limit = min(a.pyopencl_limit, max(30, int(left(a) - 20) // (len(setups) - i)))
        xml = os.path.join(tmp, f"pyopencl-{setup}.xml")
        extra = {"PYOPENCL_TEST": "portable", "XDG_CACHE_HOME": os.path.join(tmp, f"cache-{setup}"),
                 "PYTHONPATH": os.path.join(ROOT, "scripts"),
                 "PYOPENCL_SUITE_HARD_TIMEOUT": str(a.pyopencl_test_limit + 60)}
        if setup.startswith("wh-"):
            extra["WORMHOLE_PLATFORM_NAME"] = "remote"
        cmd = [py, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pyopencl_watchdog", "-n", "1",
               "-q", "--timeout", str(a.pyopencl_test_limit), "--timeout-method", "thread",
               "--junitxml", xml] + PYOPENCL_FILES.split()
        rc, out, err, secs = run(cmd, client_env(a, setup, tmp, extra), limit,
                                 cwd=a.pyopencl_tests)
        counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0}
        if os.path.exists(xml):
            for outcome in pyopencl_suite.outcomes(xml).values():
                counts[outcome] = counts.get(outcome, 0) + 1
        counts["seconds"] = round(secs, 1)
        counts["complete"] = rc is not None and os.path.exists(xml)
        res["pyopencl"][setup] = counts
        log(f"pyopencl {setup}: {counts} ({time.monotonic() - a.t0:.0f} s)")


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    halt = "?"
    try:
        with open("/sys/module/haltpoll/parameters/guest_halt_poll_ns") as f:
            halt = f.read().strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"cpus": os.cpu_count(), "cpu": cpu, "load_before": load, "kernel": os.uname().release,
            "guest_halt_poll_ns": halt, "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def left(a):
    """Seconds left of the run's budget."""
    return a.budget - (time.monotonic() - a.t0)


def save(a, res):
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)


def cmd_run(a):
    a.t0 = time.monotonic()
    # A run ended from outside (timeout) still writes what it has.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("peers.py: ended from outside"))
    os.makedirs(a.out, exist_ok=True)
    res = {"machine": machine(), "rounds": {}, "apps": {}, "idle": {}, "it": {}, "pyopencl": {},
           "settings": {"rounds": a.rounds, "iters": a.iters, "app_rounds": a.app_rounds}}
    tmp = tempfile.mkdtemp(prefix="peers-")
    os.environ["POCL_CACHE_DIR"] = os.path.join(tmp, "pocl-cache")
    servers = Servers(a, tmp)
    try:
        log(f"servers up ({time.monotonic() - a.t0:.0f} s)")
        # A first build of the shared kernels, outside every timing; a
        # setup that cannot run it at all ends the run here.
        for setup in SETUPS:
            rc, _, err, _ = run([a.peerbench, "trips", "10"], client_env(a, setup, tmp), 120)
            if rc != 0:
                raise SystemExit(f"{setup} does not work: {err.strip()[-400:]}")
        measure_rounds(a, tmp, res)
        measure_idle(a, tmp, servers, res)
        save(a, res)
        for part, f in [("apps", measure_apps), ("it", measure_it), ("pyopencl", measure_pyopencl)]:
            if part not in a.parts or (part == "pyopencl" and not a.pyopencl_venv):
                continue
            if left(a) < 60:
                log(f"{part}: skipped, {left(a):.0f} s of the budget left")
                res.setdefault("skipped", []).append(part)
                continue
            f(a, tmp, res)
            save(a, res)
    finally:
        servers.stop()
        res["machine"]["load_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
        res["machine"]["seconds"] = round(time.monotonic() - a.t0)
        save(a, res)
        shutil.rmtree(tmp, ignore_errors=True)
    report.write(a.out, res)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--bin-dir", required=True, help="Wormhole's release binaries")
    r.add_argument("--peer", required=True, help="PoCL-remote's install prefix")
    r.add_argument("--peerbench", required=True)
    r.add_argument("--demo", required=True)
    r.add_argument("--it-dir", required=True, help="the C suite's compiled programs")
    r.add_argument("--pyopencl-venv", default="")
    r.add_argument("--pyopencl-tests", default="")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--app-rounds", type=int, default=1)
    r.add_argument("--iters", type=int, default=1000)
    r.add_argument("--idle-seconds", type=int, default=8)
    r.add_argument("--it-limit", type=int, default=120)
    r.add_argument("--pyopencl-limit", type=int, default=180)
    r.add_argument("--pyopencl-test-limit", type=int, default=60)
    r.add_argument("--clblast", nargs="*", default=["xaxpy"])
    r.add_argument("--parts", default="apps,it,pyopencl")
    r.add_argument("--budget", type=float, default=float(os.environ.get("BENCH_LIMIT", 900)) - 30,
                   help="seconds the measurements may take; later parts are cut to fit")
    r.add_argument("--wh-port", type=int, default=17800)
    r.add_argument("--peer-port", type=int, default=17900)
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    a = p.parse_args()
    if a.cmd == "run":
        cmd_run(a)
    else:
        with open(os.path.join(a.out, "results.json")) as f:
            report.write(a.out, json.load(f))


if __name__ == "__main__":
    main()

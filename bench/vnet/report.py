"""Turns bench/out/vnet/raw.txt into results.json, a markdown table and a PNG chart."""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out, secs, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [l.split() for l in open(f"{out}/raw.txt").read().splitlines()[1:] if l.strip()]
order = ["veth", "kvxlan", "vnet", "vnetrt", "vnetspin", "vnetbpf", "vnetold", "n2n", "tinc"]
label = {
    "veth": "veth pair",
    "kvxlan": "kernel VXLAN",
    "vnet": "vnet, user space",
    "vnetrt": "vnet, user space, --rt-priority",
    "vnetspin": "vnet, user space, --spin-us 200",
    "vnetbpf": "vnet, kernel fast path (default)",
    "vnetold": "vnet, previous build",
    "n2n": "n2n 1.3",
    "tinc": "tinc 1.0 switch",
}
res = {}
for s in order:
    mine = [r for r in rows if r[0] == s]
    if not mine:
        continue
    res[s] = {
        "gbps_1": statistics.mean(float(r[2]) for r in mine),
        "gbps_4": statistics.mean(float(r[3]) for r in mine),
        "rtt_ms": statistics.mean(float(r[4]) for r in mine),
        "cpu_s_per_gb": statistics.mean(float(r[5]) for r in mine) if len(mine[0]) > 5 else 0.0,
        "runs": [[float(x) for x in r[2:5]] for r in mine],
    }
json.dump(res, open(f"{out}/results.json", "w"), indent=1)

k = res.get("kvxlan", {})
lines = [
    f"iperf3 {secs} s per run, {rounds} rounds alternating between setups; mean of rounds.",
    "",
    "| setup | 1 stream Gbit/s | 4 streams Gbit/s | ping RTT ms | CPU s per GB (1 stream) | 1 stream vs kernel VXLAN | RTT vs kernel VXLAN |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
for s, v in res.items():
    r1 = v["gbps_1"] / k["gbps_1"] if k.get("gbps_1") else 0
    rr = v["rtt_ms"] / k["rtt_ms"] if k.get("rtt_ms") else 0
    lines.append(
        f"| {label[s]} | {v['gbps_1']:.2f} | {v['gbps_4']:.2f} | {v['rtt_ms']:.3f} | {v['cpu_s_per_gb']:.2f} | {r1:.2f}x | {rr:.2f}x |"
    )
users = [res[s]["gbps_1"] for s in ("n2n", "tinc") if s in res and res[s]["gbps_1"] > 0]
for v in ("vnet", "vnetrt", "vnetspin", "vnetbpf", "vnetold"):
    if v in res and users:
        lines.append("")
        lines.append(f"{label[v]} single stream vs best user-level peer: {res[v]['gbps_1'] / max(users):.1f}x")
# Ratios within each round (the setups of one round ran back to back, under the same load).
kr = {int(r[1]): r for r in rows if r[0] == "kvxlan"}
lines.append("")
lines.append("Same-round ratios to kernel VXLAN (median of rounds; per round in brackets):")
lines.append("")
for s in res:
    if s == "kvxlan":
        continue
    t, l = [], []
    for r in rows:
        k_ = kr.get(int(r[1]))
        if r[0] != s or not k_ or float(k_[2]) <= 0 or float(k_[4]) <= 0:
            continue
        t.append(float(r[2]) / float(k_[2]))
        l.append(float(r[4]) / float(k_[4]))
    if t:
        lines.append(
            f"- {label[s]}: throughput {statistics.median(t):.2f}x [{', '.join(f'{x:.2f}' for x in t)}], "
            f"mean RTT {statistics.median(l):.2f}x [{', '.join(f'{x:.2f}' for x in l)}]"
        )
lines.append("")
lines.append("Per round (Gbit/s 1 stream, 4 streams, RTT ms):")
lines.append("")
for s, v in res.items():
    runs = "; ".join(f"{a:.2f}, {b:.2f}, {c:.3f}" for a, b, c in v["runs"])
    lines.append(f"- {label[s]}: {runs}")
try:
    lines += ["", open(f"{out}/flap.txt").read().strip()]
except OSError:
    pass
open(f"{out}/results.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

fig, ax = plt.subplots(1, 2, figsize=(11, 4))
names = [label[s] for s in res]
x = range(len(names))
ax[0].bar([i - 0.2 for i in x], [res[s]["gbps_1"] for s in res], 0.4, label="1 stream")
ax[0].bar([i + 0.2 for i in x], [res[s]["gbps_4"] for s in res], 0.4, label="4 streams")
ax[0].set_xticks(list(x), names, rotation=20)
ax[0].set_ylabel("Gbit/s")
ax[0].set_title("TCP throughput (iperf3)")
ax[0].legend()
ax[1].bar(list(x), [res[s]["rtt_ms"] for s in res], 0.5, color="tab:green")
ax[1].set_xticks(list(x), names, rotation=20)
ax[1].set_ylabel("ms (log scale)")
ax[1].set_yscale("log")
ax[1].set_title("ping round trip (mean)")
fig.tight_layout()
fig.savefig(f"{out}/chart.png", dpi=110)

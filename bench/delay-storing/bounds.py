"""What a run's own plan allows: bytes moved by idealised policies replayed
over the exact cells the benchmark ran (bench/delay-storing/run.py, (b)).

The server's figures say what delay storing moved; these say how far any
policy could have gone on the same plan, so a missed goal is explained by
the run's own figures. The model is deliberately kind to the policies: every
buffer is its own unit of residency, the small result buffers take no room,
and nothing is pinned. At the start, as after the benchmark's setup, the last
tenants to start fill the device, every buffer dirty (written by `init`).

- eager: at every switch, all of the previous tenant's buffers are saved and
  all of the next one's restored (what `residency = "eager"` does);
- lru: delay storing as built: restore what a cell uses if it was evicted,
  evict the least recently used buffer of another tenant, save it only if
  dirty;
- clean-first: the same, but a clean buffer is evicted before any dirty one
  (nothing to save now);
- belady: knowing the whole future, evict the buffer used again the latest
  (Belady's MIN, optimal for restores): no online policy restores less.
"""

from collections import OrderedDict


def _uses(plan, nbuf):
    """Every (buffer, written, tenant) a plan's cells touch, in order."""
    out = []
    for t, reads, writes in plan:
        for b in range(nbuf):
            if reads >> b & 1:
                out.append(((t, b), bool(writes >> b & 1), t))
    return out


def _start(tenants, nbuf, cap):
    """The buffers resident after setup: the last tenants started, dirty."""
    fit = cap // nbuf
    return [(t, b) for t in range(tenants - fit, tenants) for b in range(nbuf)]


def eager(plan, tenants, nbuf):
    """Buffers moved by the eager baseline: two tenants' worth per switch,
    the first from the last tenant started."""
    before = [tenants - 1] + [t for t, _, _ in plan]
    switches = sum(1 for a, b in zip(before, before[1:]) if a != b)
    return 2 * nbuf * switches


def online(plan, tenants, nbuf, cap, clean_first=False):
    """Buffers moved by an LRU delay-storing policy (optionally clean-first)."""
    lru = OrderedDict((b, None) for b in _start(tenants, nbuf, cap))
    dirty = set(lru)
    moved = 0
    for buf, written, t in _uses(plan, nbuf):
        if buf in lru:
            lru.move_to_end(buf)
        else:
            if len(lru) >= cap:
                others = [v for v in lru if v[0] != t]
                victim = next((v for v in others if v not in dirty), None) if clean_first else None
                victim = victim or others[0]
                del lru[victim]
                if victim in dirty:
                    dirty.discard(victim)
                    moved += 1
            lru[buf] = None
            moved += 1
        if written:
            dirty.add(buf)
    return moved


def belady(plan, tenants, nbuf, cap):
    """Buffers moved when the victim is the buffer used again the latest."""
    uses = _uses(plan, nbuf)
    never = len(uses)
    nxt, seen = [never] * len(uses), {}
    for i in range(len(uses) - 1, -1, -1):
        nxt[i] = seen.get(uses[i][0], never)
        seen[uses[i][0]] = i
    resident = {b: seen.get(b, never) for b in _start(tenants, nbuf, cap)}
    dirty = set(resident)
    moved = 0
    for i, (buf, written, _) in enumerate(uses):
        if buf not in resident:
            if len(resident) >= cap:
                victim = max(resident, key=resident.get)
                del resident[victim]
                if victim in dirty:
                    dirty.discard(victim)
                    moved += 1
            moved += 1
        resident[buf] = nxt[i]
        if written:
            dirty.add(buf)
    return moved


def allows(plan, tenants, nbuf, buf_bytes, budget_bytes):
    """Bytes each idealised policy moves over `plan`, and eager's ratio to it."""
    cap = budget_bytes // buf_bytes
    e = eager(plan, tenants, nbuf)
    moved = {
        "eager": e,
        "lru": online(plan, tenants, nbuf, cap),
        "clean-first": online(plan, tenants, nbuf, cap, clean_first=True),
        "belady": belady(plan, tenants, nbuf, cap),
    }
    return {k: {"bytes": v * buf_bytes, "less_than_eager": e / v if v else float("inf")}
            for k, v in moved.items()}

#!/usr/bin/env python3
"""sass_loop.py SASS KERNEL [FRAGS] — what a GEMM's k-tile loop costs, from SASS.

SASS is `nvdisasm -c` of a cubin (moec compile ... --emit=ptx -o k.ptx; ptxas
-arch=sm_90a k.ptx -o k.cubin; nvdisasm -c k.cubin > k.sass).  The loop is the
back edge whose span holds the most HMMA; its hot path is the blocks on a path
from its head to its latch that pass no cold block (one holding a global store,
a strong load, a vote, an atomic, MUFU or EXIT: the tile end's hand-over and
epilogue, the big-scale redo).  Prints the opcode counts of the hot path, each
also over FRAGS (default: its HMMA count; give the weight fragments where the
loop has other mma, e.g. --debug=bq-gacc's row sums).
"""
import collections
import re
import sys

COLD = re.compile(r"^(STG|LDG\.E\.STRONG|VOTE|RED|ATOM|MUFU|EXIT)")


def op(t):
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", t).split()[0]


def main():
    text = open(sys.argv[1]).read()
    m = re.search(r"\.text\.%s:\n(.*?)(?:\n\s*\.section|\Z)" % re.escape(sys.argv[2]), text, re.S)
    if not m:
        sys.exit(f"{sys.argv[2]}: not in {sys.argv[1]}")
    ins, labels, pend = [], {}, []
    for line in m.group(1).split("\n"):
        lab = re.match(r"\s*\.L_x_(\d+):", line)
        if lab:
            pend.append(lab.group(1))
        mm = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if mm:
            a = int(mm.group(1), 16)
            labels.update((p, a) for p in pend)
            pend = []
            ins.append((a, mm.group(2).strip()))
    branch = lambda t: op(t).startswith(("BRA", "BRX", "JMP", "EXIT", "RET"))
    starts = {ins[0][0]} | set(labels.values())
    starts |= {ins[i + 1][0] for i, (_, t) in enumerate(ins[:-1]) if branch(t)}
    blocks, cur = {}, None
    for a, t in ins:
        cur = a if a in starts else cur
        blocks.setdefault(cur, []).append(t)
    order = sorted(blocks)
    succ = {}
    for i, b in enumerate(order):
        last = blocks[b][-1]
        lab = re.search(r"\.L_x_(\d+)", last)
        s = {labels[lab.group(1)]} if lab and branch(last) and lab.group(1) in labels else set()
        if not (branch(last) and not last.startswith("@")) and i + 1 < len(order):
            s.add(order[i + 1])	# falls through unless an unconditional branch ends it
        succ[b] = s
    hmma = lambda lo, hi: sum(1 for a, t in ins if lo <= a <= hi and op(t).startswith("HMMA"))
    head, latch = max(((s, b) for b in order for s in succ[b] if s <= b), key=lambda e: hmma(e[0], e[1]))
    cold = {b for b in order if any(COLD.match(op(t)) for t in blocks[b])}
    pred = collections.defaultdict(set)
    for b in order:
        for s in succ[b]:
            pred[s].add(b)

    def reach(start, nbr):
        seen, todo = set(), [start]
        while todo:
            x = todo.pop()
            if x not in seen and x not in cold:
                seen.add(x)
                todo.extend(nbr[x])
        return seen

    hot = reach(head, succ) & reach(latch, pred)
    c = collections.Counter(op(t) for b in hot for t in blocks[b])
    n = sum(c.values())
    h = sum(v for k, v in c.items() if k.startswith("HMMA"))
    fr = int(sys.argv[3]) if len(sys.argv) > 3 else h
    print(f"{sys.argv[2]}: loop {head:x}..{latch:x}, hot path {len(hot)} blocks, {n} instructions, "
          f"{h} HMMA, {fr} fragments: {n / fr:.2f} a fragment")
    for k, v in c.most_common():
        print(f"  {k:<24} {v:5d} {v / fr:6.2f}")


main()

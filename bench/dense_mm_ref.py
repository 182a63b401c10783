"""dense_mm_ref.py AB_TXT M... -- torch's mm (cuBLAS) at the dense up-projection's shape
(M x 4096 x 14336, bf16, bench/models/dense_up.ir without bias and GELU), timed in the same run as an
A/B of moec's bundles, then each arm's median (bench/ab.sh's ab.txt, cases dense<M>) against it.
Three timings of mm: per call (events around one call, a synchronise after each: the GPU rests
between calls, and at small M the launch shows; how run_bench.py timed its peers before session 38), moert's (`moert bench --graph`: the call captured in
a CUDA graph, 10 replays, then 50 back to back with events around each, the median: what moec's
numbers are, and since session 38 run_bench.py's graphed()), and 20 calls back to back between two events (median of 15).  Session 37 saw the first
spread 620-671 us at M = 4096 over rounds of one run, and 625 against 706 us for the last."""
import collections
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import dev, graphed, per_call  # noqa: E402  (the one definition of each timing)


def back_to_back(fn, n=20, reps=15):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3 / n)
    return statistics.median(ts)


K, N = 4096, 14336
W = torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K)
Wt = W.t()
arms = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in line.split()[2:])
    try:
        arms[line.split()[1]][f["arm"]].append(float(f["us"]))
    except ValueError:
        pass
for M in [int(a) for a in sys.argv[2:]]:
    X = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    pc, ms, bb = per_call(lambda: X @ Wt, 10, 50), graphed(lambda: X @ Wt), back_to_back(lambda: X @ Wt)
    print("mm M=%d: %.1f us per call, %.1f us as moert times (graph), %.1f us back to back" %
          (M, pc, ms, bb))
    for a, xs in arms.get("dense%d" % M, {}).items():
        m = statistics.median(xs)
        print("  moec %-4s M=%d %.1f us: %.3fx mm as moert times, %.3fx per call, %.3fx back to back" %
              (a, M, m, ms / m, pc / m, bb / m))

#!/usr/bin/env python3
# comb_hub_router.py (session 35): DeepSeek-V3's router at full size (T=4096, H=7168,
# E=256), with a synthetic f32 weight (what the bench compiles: split-f32, three bf16
# GEMMs) and the same weight rounded to bf16 (a hub checkpoint: one bf16 GEMM, f32
# logits): each against the fp64 router of its own weight (exact products, f32 sums),
# and the two weights' routing against each other (group-limited top-8).  CPU, ~6 s:
#   python3 bench/comb_hub_router.py
import numpy as np
rng = np.random.default_rng(3)
T, H, E, K, G, TG = 4096, 7168, 256, 8, 8, 4
def bf16(a):
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)
h = bf16(rng.standard_normal((T, H)).astype(np.float32))          # the norm's output, bf16
w32 = ((rng.integers(0, 1 << 24, (E, H)) - (1 << 23)) * 2.0**-23 / np.sqrt(H)).astype(np.float32)
wbf = bf16(w32)                                                    # the hub's bf16 weight
bias = (0.05 * (rng.integers(0, 1 << 24, E) - (1 << 23)) * 2.0**-23).astype(np.float32)
def route(logits):
    s = 1 / (1 + np.exp(-logits.astype(np.float64)))
    c = s + bias
    gs = np.sort(c.reshape(T, G, E // G), axis=-1)[..., -2:].sum(-1)
    keep = np.argsort(-gs, axis=-1, kind="stable")[:, :TG]
    mask = np.zeros((T, G), bool); np.put_along_axis(mask, keep, True, axis=1)
    c = np.where(np.repeat(mask, E // G, axis=1), c, 0.0)
    return np.sort(np.argsort(-c, axis=-1, kind="stable")[:, :K], axis=-1)
def f32_logits(w):   # exact products, f32 accumulation (sgemm; the GPU's order differs)
    return h @ w.T
for name, w in (("main (f32 weight, split-f32)", w32), ("hub (bf16 weight, one GEMM)", wbf)):
    ref = h.astype(np.float64) @ w.T.astype(np.float64)
    l = f32_logits(w)
    d = np.abs(l - ref)
    flips = (route(l) != route(ref)).any(-1).sum()
    print("%-30s |f32 - fp64| max %.3g rel %.3g; tokens routed unlike its fp64 router: %d of %d" %
          (name, d.max(), d.max() / np.abs(ref).max(), flips, T))
rm, rh = route(h.astype(np.float64) @ w32.T.astype(np.float64)), route(h.astype(np.float64) @ wbf.T.astype(np.float64))
print("main's and hub's fp64 routers (different weights) route %d of %d tokens differently" %
      ((rm != rh).any(-1).sum(), T))

#!/usr/bin/env python3
"""run_gemm.py: check moec's GEMM kernels against torch and time them.

On the GPU machine, over the output of gemm_emit (bench/gemm/out: cubins or
PTX and manifest.json):

    python3 bench/gemm/run_gemm.py [--dir bench/gemm/out] [--out DIR] [--only SUBSTR]
                                   [--no-bench] [--no-check]

Every kernel is checked on fresh random inputs against torch (float64, or
float32 without TF32 for big shapes), with the output poisoned with NaN and
guard rows after it: every element must be written, nothing past it.  Then
the timings (CUDA events, median of many after warm-up), side by side with
torch in the same run, and a short table last.

The work runs in child processes; a child that crashes or hangs costs only
the job it was on (the parent restarts a child for the rest).

Without a GPU, `--fake` runs the whole harness on the CPU with a torch
stand-in for the kernels (to test this script, not the kernels).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------
# jobs: (kind, case, config)

DENSE_CHECK_M = {"d_128x256x64_s3": [77, 4096], "d_128x128x64_s3_w4": [1000]}
MOE_DIST = ["uniform", "skew", "few"]


def plan_jobs(man, args):
    jobs = []
    cases = [c for c in man["cases"] if not args.only or args.only in c["name"]]
    if not args.no_check:
        for c in cases:
            p, n = c["problem"], c["name"]
            if p == "dense":
                for M in DENSE_CHECK_M.get(n, [16 if c["spec"]["bm"] <= 32 else 300]):
                    jobs.append({"kind": "check", "case": n, "T": M, "dist": None})
            elif p in ("f8", "ds"):  # DeepSeek-V3's shapes, FP8 or bf16 (the bench job checks T=4096)
                jobs.append({"kind": "check", "case": n, "T": 300, "dist": "skew"})
            elif p in ("moe_up", "moe_down"):
                if c["spec"]["bm"] <= 32:
                    for d in MOE_DIST:
                        jobs.append({"kind": "check", "case": n, "T": 16 if d != "few" else 3, "dist": d})
                else:
                    jobs.append({"kind": "check", "case": n, "T": 4096, "dist": "uniform"})
                    jobs.append({"kind": "check", "case": n, "T": 300, "dist": "skew"})
            else:
                for T, d in [(1, "uniform"), (45, "skew"), (130, "uniform"), (64, "few")]:
                    jobs.append({"kind": "check", "case": n, "T": T, "dist": d})
                if c["spec"]["groups"] > 0:
                    jobs.append({"kind": "check", "case": n, "T": 0, "dist": "uniform"})
    if not args.no_bench:
        names = [c["name"] for c in cases]
        for M in (16, 1024, 4096):
            jobs.append({"kind": "bench_dense", "M": M, "cases": names})
        for T, d in ((16, "uniform"), (16, "skew")):
            jobs.append({"kind": "bench_moe", "T": T, "dist": d, "cases": names, "phase": "decode"})
        jobs.append({"kind": "bench_moe", "T": 4096, "dist": "uniform", "cases": names, "phase": "prefill"})
        for n in names:  # FP8 x FP8: one job per kernel (a hang costs only its own)
            if next(c for c in cases if c["name"] == n)["problem"] in ("f8", "ds"):
                jobs.append({"kind": "bench_f8", "T": 4096, "dist": "uniform", "case": n})
    for i, j in enumerate(jobs):
        j["id"] = i
    return jobs


# ----------------------------------------------------------------------------
# the child: inputs, references, launches

def child_main(args):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    man = json.load(open(os.path.join(args.dir, "manifest.json")))
    cases = {c["name"]: c for c in man["cases"]}
    jobs = json.loads(open(args.jobs).read())
    dev = "cpu" if args.fake else "cuda"
    rt = FakeRuntime(cases) if args.fake else CupyRuntime(args.dir, cases)
    for j in jobs:
        print("BEGIN %d" % j["id"], flush=True)
        t0 = time.time()
        try:
            if j["kind"] == "check":
                res = do_check(torch, dev, rt, cases[j["case"]], j)
            elif j["kind"] == "bench_dense":
                res = bench_dense(torch, dev, rt, cases, j)
            elif j["kind"] == "bench_f8":
                res = bench_f8(torch, dev, rt, cases[j["case"]], j)
            else:
                res = bench_moe(torch, dev, rt, cases, j)
        except Exception as e:  # a Python-level failure of one job
            res = {"status": "ERROR", "error": "%s: %s" % (type(e).__name__, e),
                   "trace": traceback.format_exc()[-2000:]}
            if not args.fake:
                try:
                    torch.cuda.synchronize()
                except Exception as e2:  # the context is gone: stop this child
                    res["error"] += " | context: %s" % e2
                    print("RESULT " + json.dumps(dict(res, id=j["id"])), flush=True)
                    sys.exit(3)
        res["id"] = j["id"]
        res["secs"] = round(time.time() - t0, 2)
        print("RESULT " + json.dumps(res), flush=True)
    return 0


TDT = {}


def tdt(torch, name):
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
            "f8e4m3": torch.float8_e4m3fn}[name]


def grid_of(k, T):
    def ev(e):
        v = e["a"] * T + e["b"]
        return (v + e["div"] - 1) // e["div"] if e["div"] > 0 else v
    return tuple(ev(e) for e in k["grid"])


def routing(torch, dev, T, topk, E, dist, gen):
    """Experts per token (distinct), pairs sorted by expert: perm, counts, weights."""
    if dist == "uniform":
        score = torch.rand(T, E, generator=gen, device=dev)
    elif dist == "skew":  # a few hot experts, some never chosen
        w = torch.tensor([(e + 1.0) ** 3 if e % 4 != 1 else 0.0 for e in range(E)], device=dev)
        score = torch.rand(T, E, generator=gen, device=dev) * w
    else:  # "few": only experts E-1 .. E-topk
        score = torch.zeros(T, E, device=dev)
        score[:, E - topk:] = torch.rand(T, topk, generator=gen, device=dev) + 1
    ex = torch.topk(score, topk, dim=1).indices  # [T, topk]
    flat = ex.reshape(-1)
    perm = torch.sort(flat, stable=True).indices.to(torch.int32)  # pair indices sorted by expert
    counts = torch.bincount(flat, minlength=E).to(torch.int32)
    offs = torch.zeros(E + 1, dtype=torch.int32, device=dev)
    offs[1:] = torch.cumsum(counts, 0)
    return perm, offs, ex


class Problem:
    pass


def make_problem(torch, dev, case, T, dist, seed):
    """Inputs of one launch, by parameter role, plus what the reference needs."""
    s = case["spec"]
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    P = Problem()
    E = s["groups"]
    M = s["m_per_t"] * T
    N, K = s["N"], s["K"]
    sw = [i for i, e in enumerate(s["ep"]) if e["op"] == "swiglu"]
    P.sw = sw[0] if sw else None
    P.width = N // 2 if sw else N
    P.M, P.T, P.E = M, T, E
    div = s["gather_div"] if s["gather"] else 1
    P.div = div
    if E > 0:
        perm, offs, ex = routing(torch, dev, T, s["m_per_t"], E, dist, gen)
        P.offs = offs
        P.e_rows = torch.repeat_interleave(torch.arange(E, device=dev), (offs[1:] - offs[:-1]).long())
    else:
        perm = torch.randperm(M, generator=gen, device=dev).to(torch.int32)
        P.offs = None
        P.e_rows = torch.zeros(M, dtype=torch.long, device=dev)
    P.gidx = perm if s["gather"] else None
    P.sidx = perm if s["store"] == "scatter" else None
    msrc = (M + div - 1) // div if s["gather"] else M
    P.msrc = msrc

    def randn(n, dt, scale=1.0):
        return (torch.randn(n, generator=gen, device=dev) * scale).to(tdt(torch, dt))

    f8 = s.get("f8_group", 0)
    P.As = P.Bs = None
    # FP8 x FP8: e4m3 values about 4 (e4m3 keeps 3 bits of mantissa), the scales carry the size
    P.A = randn(msrc * s["lda"], s["a_dt"], 4.0 if f8 else 1.0).view(msrc, s["lda"]) if msrc else randn(1, s["a_dt"])
    rows_b = N if s["b_layout"] == "NK" else K
    nb = (max(E, 1) - 1) * s["b_group_stride"] + rows_b * s["ldb"]
    P.B = randn(nb, s["b_dt"], 4.0 if f8 else 1.0 / math.sqrt(K))
    if f8:  # f32 scales per row and f8_group k: A [msrc][K/g], B [E][N][K/g]
        kb = K // f8
        P.As = (torch.rand(max(msrc, 1) * kb, generator=gen, device=dev) + 0.5).view(-1, kb) / 4
        P.Bs = (torch.rand(max(E, 1) * N * kb, generator=gen, device=dev) + 0.5) / (4 * math.sqrt(K))
        bb = s.get("f8_b_block", 0)
        if bb > 1:  # one scale per bb stored rows of an expert (a checkpoint's 2-D blocks)
            rows = torch.arange(N, device=dev) // bb * bb
            P.Bs = P.Bs.view(max(E, 1), N, kb)[:, rows, :].contiguous().view(-1)
    P.guard = 4
    P.C = torch.full(((M + P.guard) * s["ldc"],), float("nan"), dtype=tdt(torch, s["c_dt"]), device=dev)
    P.leaf = {}
    for i, e in enumerate(s["ep"]):
        space = P.width if (P.sw is not None and i > P.sw) else N
        if e["op"] == "col":
            n = (max(E, 1) - 1) * e["group_stride"] + space if e["group_stride"] else space
            P.leaf[i] = randn(n, e["dt"])
        elif e["op"] == "row":
            n = msrc if e["rows"] == "gather" else M
            if e["role"] == "route_w":  # routing weights: in (0, 1)
                P.leaf[i] = torch.rand(max(n, 1), generator=gen, device=dev).to(tdt(torch, e["dt"]))
            else:
                P.leaf[i] = randn(max(n, 1), e["dt"])
        elif e["op"] == "mat":
            n = msrc if e["rows"] == "gather" else M
            P.leaf[i] = randn(max(n, 1) * (e["ld"] or space), e["dt"])
    return P


class TmapArg:
    """A CUtensorMap (128 bytes, 64-aligned) for a `tmap` parameter: encoded by
    the driver's cuTensorMapEncodeTiled on the GPU; left zero by --fake."""

    DTYPE = {"bf16": 9, "f16": 6, "f32": 7, "f8e4m3": 0}     # CUtensorMapDataType (e4m3: UINT8)
    SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}      # CUtensorMapSwizzle
    # CUtensorMapL2promotion: 2 = 128B (moert's); TMA_L2=3 (256B) for an A/B of the
    # FP8 kernels, whose box rows are 128 bytes of rows 2-7 KB apart
    L2 = int(os.environ.get("TMA_L2", "2"))
    lib = None

    def __init__(self, t, ptr, T, fake):
        import ctypes as C
        self.raw = C.create_string_buffer(128 + 64)
        self.addr = (C.addressof(self.raw) + 63) & ~63
        if fake:
            return
        if TmapArg.lib is None:
            TmapArg.lib = C.CDLL("libcuda.so.1")
        r = t["rank"]
        ev = [e["a"] * T + e["b"] for e in t["dims"]]
        ev = [(v + e["div"] - 1) // e["div"] if e["div"] > 0 else v for v, e in zip(ev, t["dims"])]
        dims = (C.c_uint64 * r)(*[max(v, 1) for v in ev])  # rows past M are never stored
        strides = (C.c_uint64 * max(r - 1, 1))(*t["strides"][:r - 1])
        box = (C.c_uint32 * r)(*t["box"][:r])
        estr = (C.c_uint32 * r)(*([1] * r))
        rc = TmapArg.lib.cuTensorMapEncodeTiled(
            C.c_void_p(self.addr), C.c_int(self.DTYPE[t["dt"]]), C.c_uint32(r), C.c_void_p(ptr),
            dims, strides, box, estr, C.c_int(0), C.c_int(self.SWIZZLE[t["swizzle"]]),
            C.c_int(self.L2), C.c_int(0))  # L2 promotion (moert's: 128B), out of bounds: zeros
        if rc != 0:
            raise RuntimeError("cuTensorMapEncodeTiled(%s) failed: CUresult %d" % (t, rc))


def kernel_args(case, P, fake=False):
    import numpy as np
    roles = {"A": P.A, "B": P.B, "C": P.C, "gather_idx": P.gidx, "scatter_idx": P.sidx,
             "offsets": P.offs, "A_scale": P.As, "B_scale": P.Bs}
    s = case["spec"]
    li = [i for i, e in enumerate(s["ep"]) if e["op"] in ("col", "row", "mat")]
    maps = list(case["kernel"].get("tmaps", []))
    args, tensors = [], []
    for kind, role in case["kernel"]["params"]:
        if kind == "tmap":
            t = maps.pop(0)
            m = TmapArg(t, roles[t["of"]].data_ptr(), P.T, fake or roles[t["of"]].device.type == "cpu")
            args.append(m)
            tensors.append(m)
            continue
        if kind == "i32":
            assert role == "T"
            args.append(np.int32(P.T))
            tensors.append(P.T)
            continue
        if role in roles:
            t = roles[role]
        else:
            t = P.leaf[li.pop(0)]
        assert t is not None, role
        args.append(np.uint64(t.data_ptr()))
        tensors.append(t)
    return args, tensors


def reference(torch, case, P, dt):
    """The GEMM and its epilogue in dt (float64 or float32)."""
    s = case["spec"]
    N, K, M = s["N"], s["K"], P.M
    A = P.A[:, :K].to(dt)
    f8 = s.get("f8_group", 0)
    if f8:  # FP8 x FP8: the blockwise sums times sa * sb are the dequantised operands' product
        A = A * P.As.to(dt).repeat_interleave(f8, dim=1)[:A.shape[0], :K]
        Bs = P.Bs.view(max(P.E, 1), N, K // f8)  # expanded per expert below (all at once: 30 GB)
    if s["gather"]:
        A = A[(P.gidx // P.div).long()]
    acc = torch.empty(M, N, dtype=dt, device=A.device)
    G = max(P.E, 1)
    for e in range(G):
        lo, hi = (int(P.offs[e]), int(P.offs[e + 1])) if P.E else (0, M)
        if hi <= lo:
            continue
        base = e * s["b_group_stride"]
        if s["b_layout"] == "NK":
            Be = P.B[base: base + N * s["ldb"]].view(N, s["ldb"])[:, :K].to(dt)
            if f8:
                assert not s.get("f8_interleave"), "an interleaved FP8 B: not in this reference"
                Be = Be * Bs[e].to(dt).repeat_interleave(f8, dim=1)
            acc[lo:hi] = A[lo:hi] @ Be.T
        else:
            Be = P.B[base: base + K * s["ldb"]].view(K, s["ldb"])[:, :N].to(dt)
            acc[lo:hi] = A[lo:hi] @ Be
    return epilogue_ref(torch, s, P, acc, dt)


def rowidx(torch, P, mode):
    if mode == "direct":
        return torch.arange(P.M, device=P.C.device)
    if mode == "gather":
        return (P.gidx // P.div).long()
    if mode == "gather_raw":
        return P.gidx.long()
    return P.sidx.long()


def epilogue_ref(torch, s, P, acc, dt):
    F = torch.nn.functional
    ep = s["ep"]
    if not ep:
        return acc
    v = {}
    for i, e in enumerate(ep):
        op = e["op"]
        space = P.width if (P.sw is not None and i > P.sw) else s["N"]
        a = v.get(e["a"])
        b = v.get(e["b"])
        if op == "acc":
            v[i] = acc
        elif op == "imm":
            v[i] = torch.tensor(e["imm"], dtype=dt, device=acc.device)
        elif op == "col":
            vec = P.leaf[i].to(dt)
            if e["group_stride"]:
                idx = P.e_rows[:, None] * e["group_stride"] + torch.arange(space, device=acc.device)[None, :]
                v[i] = vec[idx]
            else:
                v[i] = vec[:space][None, :]
        elif op == "row":
            v[i] = P.leaf[i].to(dt)[rowidx(torch, P, e["rows"])][:, None]
        elif op == "mat":
            ld = e["ld"] or space
            v[i] = P.leaf[i].to(dt).view(-1, ld)[rowidx(torch, P, e["rows"])][:, :space]
        elif op == "add":
            v[i] = a + b
        elif op == "sub":
            v[i] = a - b
        elif op == "mul":
            v[i] = a * b
        elif op == "div":
            v[i] = a / b
        elif op == "min":
            v[i] = torch.minimum(a, b)
        elif op == "max":
            v[i] = torch.maximum(a, b)
        elif op == "neg":
            v[i] = -a
        elif op == "relu":
            v[i] = torch.relu(a)
        elif op == "sigmoid":
            v[i] = torch.sigmoid(a)
        elif op == "tanh":
            v[i] = torch.tanh(a)
        elif op == "exp":
            v[i] = torch.exp(a)
        elif op == "silu":
            v[i] = F.silu(a)
        elif op == "gelu_erf":
            v[i] = F.gelu(a)
        elif op == "gelu_tanh":
            v[i] = F.gelu(a, approximate="tanh")
        elif op in ("clamp", "clip"):
            v[i] = torch.clamp(a, e["lo"], e["hi"])
        elif op == "swiglu":
            g, u = a[:, 0::2], a[:, 1::2]
            if e["lim"] > 0:
                g = torch.clamp(g, max=e["lim"])
                u = torch.clamp(u, -e["lim"], e["lim"])
                v[i] = (u + 1) * g * torch.sigmoid(e["alpha"] * g)
            else:
                v[i] = F.silu(g) * u
        else:
            raise ValueError("epilogue op " + op)
    out = v[len(ep) - 1]
    return out.expand(P.M, P.width) if out.dim() < 2 or out.shape[0] != P.M else out


def compare(torch, case, P, ref):
    s = case["spec"]
    C = P.C.view(P.M + P.guard, s["ldc"])
    dst = P.sidx.long() if P.sidx is not None else torch.arange(P.M, device=C.device)
    got = C[dst, :P.width].double()
    want = ref.double()
    res = {}
    unwritten = int(torch.isnan(got).sum()) - int(torch.isnan(want).sum())
    guard_written = int((~torch.isnan(C[P.M:].float())).sum())
    extra = int((~torch.isnan(C[:P.M, P.width:].float())).sum()) if s["ldc"] > P.width else 0
    d = (got - want)
    d = torch.where(torch.isnan(want), torch.zeros_like(d), d)
    num = float(torch.linalg.vector_norm(torch.nan_to_num(d, nan=1e30)))
    den = float(torch.linalg.vector_norm(torch.nan_to_num(want)))
    rel = num / den if den > 0 else num
    res["rel_l2"] = rel
    res["max_abs"] = float(torch.nan_to_num(d.abs(), nan=1e30).max()) if d.numel() else 0.0
    res["unwritten"] = unwritten
    res["guard_written"] = guard_written + extra
    tol = 1e-2
    ok = unwritten == 0 and guard_written + extra == 0 and rel < tol
    res["status"] = "PASS" if ok else "FAIL"
    return res


def run_kernel(rt, case, P):
    args, keep = kernel_args(case, P)
    g = grid_of(case["kernel"], P.T)
    if g[0] == 0 or g[1] == 0:
        return None
    rt.launch(case, g, args, keep)
    return g


def do_check(torch, dev, rt, case, j):
    P = make_problem(torch, dev, case, j["T"], j["dist"], seed=1000 + j["id"])
    run_kernel(rt, case, P)
    rt.sync()
    if P.M == 0:  # nothing to compute: nothing may be written
        w = int((~torch.isnan(P.C.float())).sum())
        return {"status": "PASS" if w == 0 else "FAIL", "case": case["name"], "T": 0, "M": 0,
                "rel_l2": 0.0, "unwritten": 0, "guard_written": w}
    s = case["spec"]
    big = P.M * s["N"] * s["K"] > (1 << 31)
    ref = reference(torch, case, P, torch.float32 if big else torch.float64)
    res = compare(torch, case, P, ref)
    res.update({"case": case["name"], "T": j["T"], "M": P.M, "dist": j["dist"],
                "ref": "f32" if big else "f64"})
    if P.E:
        res["counts"] = (P.offs[1:] - P.offs[:-1]).tolist()
    return res


# ----------------------------------------------------------------------------
# timing

def timeit(torch, dev, fn, reps=40, warm=5):
    if dev == "cpu":
        fn()
        return 1.0
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    try:
        torch.cuda._sleep(50_000_000)  # let the launches queue up behind it
    except Exception:
        pass
    for i in range(reps):
        st[i].record()
        fn()
        en[i].record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) * 1000.0 for a, b in zip(st, en))
    return t[len(t) // 2]


def bench_dense(torch, dev, rt, cases, j):
    F = torch.nn.functional
    M = j["M"]
    out = {"status": "PASS", "M": M, "rows": []}
    names = [n for n in j["cases"] if cases[n]["problem"] == "dense"]
    small = [n for n in names if cases[n]["spec"]["bm"] <= 32]
    large = [n for n in names if cases[n]["spec"]["bm"] > 32]
    use = small if M <= 64 else large
    if M <= 64:
        use += large[:1]
    if not use:
        return out
    c0 = cases[use[0]]
    N, K = c0["spec"]["N"], c0["spec"]["K"]
    flops = 2.0 * M * N * K
    out["N"], out["K"] = N, K
    # two weight copies for small M so that repeated runs don't sit in L2
    nrot = 2 if M <= 64 else 1
    Ps = [make_problem(torch, dev, c0, M, None, seed=77 + r) for r in range(nrot)]
    W = [P.B.view(N, K) for P in Ps]
    bias = [P.leaf[1] for P in Ps]
    X = Ps[0].A
    it = [0]

    def rot():
        it[0] += 1
        return it[0] % nrot

    t = timeit(torch, dev, lambda: torch.matmul(X, W[rot()].T))
    out["rows"].append({"what": "torch.matmul", "us": t, "tflops": flops / t / 1e6})
    t = timeit(torch, dev, lambda: F.gelu(torch.addmm(bias[0], X, W[rot()].T)))
    out["rows"].append({"what": "torch addmm+gelu", "us": t, "tflops": flops / t / 1e6})
    for n in use:
        c = cases[n]
        Pk = [make_problem(torch, dev, c, M, None, seed=77 + r) for r in range(nrot)]
        for r in range(nrot):  # the same data as torch's
            Pk[r].A, Pk[r].B, Pk[r].leaf[1] = X, Ps[r].B, Ps[r].leaf[1]
        argl = [kernel_args(c, P) for P in Pk]
        g = grid_of(c["kernel"], M)

        def fn(c=c, argl=argl, g=g):
            a, keep = argl[rot()]
            rt.launch(c, g, a, keep)
        t = timeit(torch, dev, fn)
        ok = True
        if dev != "cpu":
            ref = reference(torch, c, Pk[0], torch.float32)
            r = compare(torch, c, Pk[0], ref)
            ok = r["status"] == "PASS"
        out["rows"].append({"what": n, "us": t, "tflops": flops / t / 1e6, "ok": ok,
                            "regs": c["kernel"]["regs"], "smem": c["kernel"]["smem"]})
        if not ok:
            out["status"] = "FAIL"
    if M >= 4096 and dev != "cpu":  # the spread between two timings of the same thing
        t = timeit(torch, dev, lambda: torch.matmul(X, W[rot()].T))
        out["rows"].append({"what": "torch.matmul (again)", "us": t, "tflops": flops / t / 1e6})
    return out


def bench_moe(torch, dev, rt, cases, j):
    T, phase = j["T"], j["phase"]
    ups = [n for n in j["cases"] if cases[n]["problem"] == "moe_up"]
    dns = [n for n in j["cases"] if cases[n]["problem"] == "moe_down"]
    sel = (lambda c: c["spec"]["bm"] <= 32) if phase == "decode" else (lambda c: c["spec"]["bm"] > 32)
    ups = [n for n in ups if sel(cases[n])]
    dns = [n for n in dns if sel(cases[n])]
    out = {"status": "PASS", "T": T, "dist": j["dist"], "phase": phase, "rows": []}
    if not ups or not dns:
        return out
    cu, cd = cases[ups[0]], cases[dns[0]]
    E, H, I2 = cu["spec"]["groups"], cu["spec"]["K"], cu["spec"]["N"]
    I = I2 // 2
    Pu = make_problem(torch, dev, cu, T, j["dist"], seed=5)
    Pd = make_problem(torch, dev, cd, T, j["dist"], seed=5)
    # the down GEMM reads the up GEMM's output, in the same expert order
    Pd.offs, Pd.sidx, Pd.e_rows = Pu.offs, Pu.gidx, Pu.e_rows
    Pd.A = torch.empty(Pu.M, I, dtype=Pu.C.dtype, device=Pu.C.device)
    counts = (Pu.offs[1:] - Pu.offs[:-1]).tolist()
    active = sum(1 for c in counts if c > 0)
    wbytes = active * (I2 * H + H * I) * 2
    flops = 2.0 * Pu.M * (I2 * H + H * I)
    out.update({"counts": counts, "active": active, "weight_bytes": wbytes})
    hview = Pu.C.view(Pu.M + Pu.guard, -1)[:Pu.M]

    def pair_args(nu, nd):
        au, ku = kernel_args(cases[nu], Pu)
        Pd.A = hview  # the up kernel writes h in place of Pu.C's first M rows
        ad, kd = kernel_args(cases[nd], Pd)
        return (au, ku, grid_of(cases[nu]["kernel"], T)), (ad, kd, grid_of(cases[nd]["kernel"], T))

    # check one pair end to end first
    (au, ku, gu), (ad, kd, gd) = pair_args(ups[0], dns[0])
    rt.launch(cases[ups[0]], gu, au, ku)
    rt.launch(cases[dns[0]], gd, ad, kd)
    rt.sync()
    ok = True
    if dev != "cpu":
        ru = compare(torch, cu, Pu, reference(torch, cu, Pu, torch.float32))
        rd = compare(torch, cd, Pd, reference(torch, cd, Pd, torch.float32))
        out["check_up"], out["check_down"] = ru, rd
        ok = ru["status"] == "PASS" and rd["status"] == "PASS"
    if not ok:
        out["status"] = "FAIL"
    for nu in ups:
        (au, ku, gu), _ = pair_args(nu, dns[0])
        t = timeit(torch, dev, lambda: rt.launch(cases[nu], gu, au, ku))
        bytes_up = active * I2 * H * 2
        out["rows"].append({"what": nu, "us": t, "GBps": bytes_up / t / 1e3, "tflops": 2.0 * Pu.M * I2 * H / t / 1e6})
    for nd in dns:
        _, (ad, kd, gd) = pair_args(ups[0], nd)
        t = timeit(torch, dev, lambda: rt.launch(cases[nd], gd, ad, kd))
        bytes_dn = active * H * I * 2
        out["rows"].append({"what": nd, "us": t, "GBps": bytes_dn / t / 1e3, "tflops": 2.0 * Pu.M * H * I / t / 1e6})
    # the best pair, timed together
    best_u = min((r for r in out["rows"] if r["what"] in ups), key=lambda r: r["us"])["what"]
    best_d = min((r for r in out["rows"] if r["what"] in dns), key=lambda r: r["us"])["what"]
    (au, ku, gu), (ad, kd, gd) = pair_args(best_u, best_d)

    def both():
        rt.launch(cases[best_u], gu, au, ku)
        rt.launch(cases[best_d], gd, ad, kd)
    t = timeit(torch, dev, both)
    out["rows"].append({"what": "moec up+down (%s + %s)" % (best_u, best_d), "us": t,
                        "GBps": wbytes / t / 1e3, "tflops": flops / t / 1e6})
    # torch: grouped_mm over the same permuted rows (GEMMs only), if this torch has it
    try:
        w13 = Pu.B.view(E, I2, H)
        w2 = Pd.B.view(E, H, I)
        xp = Pu.A[(Pu.gidx // Pu.div).long()]
        ends = Pu.offs[1:].contiguous()
        hb = torch.empty(Pu.M, I, dtype=torch.bfloat16, device=xp.device)

        def tg():
            torch._grouped_mm(xp, w13.transpose(1, 2), offs=ends)
            torch._grouped_mm(hb, w2.transpose(1, 2), offs=ends)
        t = timeit(torch, dev, tg)
        out["rows"].append({"what": "torch._grouped_mm x2 (GEMMs only)", "us": t,
                            "GBps": wbytes / t / 1e3, "tflops": flops / t / 1e6})
    except Exception as e:
        out["torch_grouped_mm"] = "%s: %s" % (type(e).__name__, str(e)[:200])
    return out


def bench_f8(torch, dev, rt, case, j):
    """One FP8 x FP8 kernel at T tokens: checked once (f32 reference), then
    timed; TFLOP/s over the 2 M N K of its rows (M = m_per_t T)."""
    s = case["spec"]
    P = make_problem(torch, dev, case, j["T"], j["dist"], seed=11)
    args, keep = kernel_args(case, P)
    g = grid_of(case["kernel"], P.T)
    rt.launch(case, g, args, keep)
    rt.sync()
    out = {"status": "PASS", "T": P.T, "M": P.M, "rows": []}
    if dev != "cpu":
        r = compare(torch, case, P, reference(torch, case, P, torch.float32))
        out["check"] = r
        out["status"] = r["status"]
    t = timeit(torch, dev, lambda: rt.launch(case, g, args, keep))
    flops = 2.0 * P.M * s["N"] * s["K"]
    out["rows"].append({"what": case["name"], "us": t, "tflops": flops / t / 1e6,
                        "regs": case["kernel"]["regs"], "smem": case["kernel"]["smem"]})
    return out


# ----------------------------------------------------------------------------
# runtimes

class CupyRuntime:
    def __init__(self, d, cases):
        import cupy
        self.cupy = cupy
        self.dir = d
        self.mods = {}
        self.fns = {}
        self.occ = {}   # cluster kernels: cuOccupancyMaxActiveClusters

    def fn(self, case):
        n = case["name"]
        if n not in self.fns:
            path = os.path.join(self.dir, case["file"])
            try:
                mod = self.cupy.RawModule(path=path)
                f = mod.get_function(case["kernel"]["name"])
            except Exception:
                path = os.path.join(self.dir, n + ".ptx")
                mod = self.cupy.RawModule(path=path)
                f = mod.get_function(case["kernel"]["name"])
            smem = case["kernel"]["smem"]
            if smem > 48 * 1024:
                f.max_dynamic_shared_size_bytes = smem
            self.mods[n] = mod
            self.fns[n] = f
        return self.fns[n]

    def launch(self, case, grid, args, keep):
        b = case["kernel"]["block"]
        f = self.fn(case)
        if any(isinstance(a, TmapArg) for a in args):
            return self.launch_ctypes(f, case, grid, b, args)
        f(grid, tuple(b), tuple(args), shared_mem=case["kernel"]["smem"])

    def launch_ctypes(self, f, case, grid, b, args):
        """cuLaunchKernel itself: tensor maps are 128-byte parameters by value."""
        import ctypes as C
        import numpy as np
        if TmapArg.lib is None:
            TmapArg.lib = C.CDLL("libcuda.so.1")
        vals = []
        for a in args:
            if isinstance(a, TmapArg):
                vals.append(C.c_void_p(a.addr))
                continue
            v = C.c_int32(int(a)) if isinstance(a, np.int32) else C.c_uint64(int(a))
            vals.append(v)
        keep = [v for v in vals]
        ptrs = (C.c_void_p * len(vals))(*[v.value if isinstance(v, C.c_void_p) else C.addressof(v)
                                          for v in vals])
        g = list(grid) + [1] * (3 - len(grid))
        # a RawKernel holds its CUfunction in .kernel (a cupy.cuda.function.Function)
        fptr = f.kernel.ptr if hasattr(f, "kernel") else f.ptr
        if case["kernel"].get("cluster", 0) > 1:
            rc = self.launch_cluster(fptr, case, g, b, ptrs)
        else:
                rc = TmapArg.lib.cuLaunchKernel(C.c_void_p(fptr), C.c_uint(g[0]), C.c_uint(g[1]), C.c_uint(g[2]),
                                            C.c_uint(b[0]), C.c_uint(b[1]), C.c_uint(b[2]),
                                            C.c_uint(case["kernel"]["smem"]),
                                            C.c_void_p(self.cupy.cuda.get_current_stream().ptr), ptrs, None)
        del keep
        if rc != 0:
            raise RuntimeError("cuLaunchKernel: CUresult %d" % rc)

    def launch_cluster(self, fptr, case, g, b, ptrs):
        """cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (4) = (cluster, 1, 1):
        the kernel's clusters (k_gemm_ws.c, GemmSpec.cluster)."""
        import ctypes as C

        class Attr(C.Structure):   # CUlaunchAttribute: id, pad to 8, a 64-byte value union
            _fields_ = [("id", C.c_int), ("pad", C.c_char * 4), ("val", C.c_uint * 16)]

        class Config(C.Structure):  # CUlaunchConfig
            _fields_ = [("grid", C.c_uint * 3), ("block", C.c_uint * 3), ("smem", C.c_uint),
                        ("stream", C.c_void_p), ("attrs", C.POINTER(Attr)), ("nattrs", C.c_uint)]

        a = Attr()
        a.id = 4
        a.val[0], a.val[1], a.val[2] = case["kernel"]["cluster"], 1, 1
        cfg = Config((C.c_uint * 3)(*g), (C.c_uint * 3)(*b), case["kernel"]["smem"],
                     C.c_void_p(self.cupy.cuda.get_current_stream().ptr), C.pointer(a), 1)
        if case["name"] not in self.occ:   # once a kernel: do all its clusters fit at once?
            n = C.c_int(-1)
            rc = TmapArg.lib.cuOccupancyMaxActiveClusters(C.byref(n), C.c_void_p(fptr), C.byref(cfg))
            self.occ[case["name"]] = n.value
            print("cluster occupancy: %s grid %d, clusters of %d: %d active at most (CUresult %d)"
                  % (case["name"], g[0], case["kernel"]["cluster"], n.value, rc), file=sys.stderr, flush=True)
        return TmapArg.lib.cuLaunchKernelEx(C.byref(cfg), C.c_void_p(fptr), ptrs, None)

    def sync(self):
        self.cupy.cuda.runtime.deviceSynchronize()


class FakeRuntime:
    """CPU stand-in: writes the reference (in float32) into C; tests this script."""

    def __init__(self, cases):
        pass

    def launch(self, case, grid, args, keep):
        import torch
        s = case["spec"]
        P = Problem()
        roles = {}
        li = [i for i, e in enumerate(s["ep"]) if e["op"] in ("col", "row", "mat")]
        P.leaf = {}
        for (kind, role), t in zip(case["kernel"]["params"], keep):
            if kind == "tmap":
                continue
            if kind == "i32":
                P.T = t
            elif role in ("A", "B", "C", "gather_idx", "scatter_idx", "offsets", "A_scale", "B_scale"):
                roles[role] = t
            else:
                P.leaf[li.pop(0)] = t
        P.A, P.B, P.C = roles["A"], roles["B"], roles["C"]
        P.As, P.Bs = roles.get("A_scale"), roles.get("B_scale")
        P.gidx, P.sidx, P.offs = roles.get("gather_idx"), roles.get("scatter_idx"), roles.get("offsets")
        P.M = s["m_per_t"] * P.T
        if P.M == 0:
            return
        P.E = s["groups"]
        P.div = s["gather_div"] if s["gather"] else 1
        sw = [i for i, e in enumerate(s["ep"]) if e["op"] == "swiglu"]
        P.sw = sw[0] if sw else None
        P.width = s["N"] // 2 if sw else s["N"]
        if P.E:
            P.e_rows = torch.repeat_interleave(torch.arange(P.E), (P.offs[1:] - P.offs[:-1]).long())
        else:
            P.e_rows = torch.zeros(P.M, dtype=torch.long)
        if P.A.dim() == 1:
            P.A = P.A.view(-1, s["lda"])
        if P.As is not None and P.As.dim() == 1:
            P.As = P.As.view(-1, s["K"] // s["f8_group"])
        ref = reference(torch, case, P, torch.float32)
        C = P.C.view(-1, s["ldc"])
        dst = P.sidx.long() if P.sidx is not None else torch.arange(P.M)
        C[dst, :P.width] = ref.to(C.dtype)

    def sync(self):
        pass


# ----------------------------------------------------------------------------
# the parent: children, results, the table

def run_children(args, jobs):
    import tempfile
    results = {}
    todo = list(jobs)
    log = open(os.path.join(args.out, "log.txt"), "a") if args.out else None
    while todo:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(todo, f)
            jpath = f.name
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--jobs", jpath, "--dir", args.dir]
        if args.fake:
            cmd.append("--fake")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        cur = None
        last = time.time()
        import selectors
        sel = selectors.DefaultSelector()
        fd = p.stdout.fileno()
        sel.register(fd, selectors.EVENT_READ)
        hung = False
        buf = b""
        eof = False
        while not eof:
            if sel.select(timeout=5):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    eof = True
                buf += chunk
                last = time.time()
                *lines, buf = buf.split(b"\n")
                if eof and buf:
                    lines.append(buf)
                for raw in lines:
                    line = raw.decode("utf-8", "replace") + "\n"
                    if log:
                        log.write(line)
                        log.flush()
                    if line.startswith("BEGIN "):
                        cur = int(line.split()[1])
                    elif line.startswith("RESULT "):
                        r = json.loads(line[7:])
                        results[r["id"]] = r
                        show(jobs[r["id"]], r)
                        cur = None
                    elif line.strip():
                        sys.stdout.write("  | " + line)
            elif time.time() - last > args.job_timeout:
                hung = True
                p.kill()
                break
        p.wait()
        os.unlink(jpath)
        done = set(results)
        if cur is not None and cur not in done:
            r = {"id": cur, "status": "HANG" if hung else "CRASH", "error": "child exit %s" % p.returncode}
            results[cur] = r
            show(jobs[cur], r)
            done.add(cur)
        rest = [j for j in todo if j["id"] not in done]
        if len(rest) == len(todo):  # no progress at all: give up
            for j in rest:
                results[j["id"]] = {"id": j["id"], "status": "NOTRUN", "error": "child exit %s" % p.returncode}
            break
        todo = rest
    return results


def show(job, r):
    if job["kind"] == "check":
        print("%-5s %-24s T=%-5s %-8s rel_l2=%-10.3g unwritten=%s guard=%s %s" % (
            r.get("status"), job["case"], job["T"], job["dist"] or "", r.get("rel_l2", float("nan")),
            r.get("unwritten", "?"), r.get("guard_written", "?"), r.get("error", "")), flush=True)
    else:
        print("%-5s %s %s %s" % (r.get("status"), job["kind"], {k: job[k] for k in job if k in ("M", "T", "dist")},
                                 r.get("error", "")), flush=True)
        for row in r.get("rows", []):
            print("      %-44s %9.1f us  %s" % (row["what"], row["us"],
                  ("%7.1f TFLOP/s" % row["tflops"]) + ("  %7.1f GB/s" % row["GBps"] if "GBps" in row else "")),
                  flush=True)


def table(jobs, results):
    print("\n==== summary ====")
    nck = [results.get(j["id"], {}).get("status") for j in jobs if j["kind"] == "check"]
    print("checks: %d PASS, %d FAIL, %d other" % (nck.count("PASS"), nck.count("FAIL"),
                                                 len(nck) - nck.count("PASS") - nck.count("FAIL")))
    for j in jobs:
        r = results.get(j["id"], {})
        if j["kind"] == "check" and r.get("status") != "PASS":
            print("  %s %s T=%s %s: %s" % (r.get("status"), j["case"], j["T"], j["dist"],
                                           r.get("error", "rel_l2=%.3g unwritten=%s guard=%s" % (
                                               r.get("rel_l2", float("nan")), r.get("unwritten"), r.get("guard_written")))))
    for j in jobs:
        if j["kind"] == "check":
            continue
        r = results.get(j["id"], {})
        rows = r.get("rows", [])
        if j["kind"] == "bench_f8":
            for x in rows:
                print("%s %-36s T=%d M=%s %9.1f us %7.1f TFLOP/s [%s]" % (
                    "fp8" if x["what"].startswith("f8") else "alone", x["what"], j["T"], r.get("M"), x["us"],
                    x["tflops"], r.get("status")))
            continue
        if j["kind"] == "bench_dense":
            print("dense bias+gelu M=%d N=%s K=%s [%s]" % (j["M"], r.get("N"), r.get("K"), r.get("status")))
            base = next((x["us"] for x in rows if x["what"] == "torch.matmul"), None)
            for x in sorted(rows, key=lambda x: x["us"]):
                print("  %-30s %9.1f us %7.1f TFLOP/s %6.2fx of torch.matmul" % (
                    x["what"], x["us"], x["tflops"], base / x["us"] if base else 0))
        else:
            print("moe %s T=%d %s counts=%s active=%s weights=%.2f GB [%s]" % (
                j["phase"], j["T"], j["dist"], r.get("counts"), r.get("active"),
                r.get("weight_bytes", 0) / 1e9, r.get("status")))
            for x in sorted(rows, key=lambda x: x["us"]):
                print("  %-46s %9.1f us %8.1f GB/s %7.1f TFLOP/s" % (x["what"], x["us"], x.get("GBps", 0), x["tflops"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(HERE, "out"))
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--only")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--jobs")
    ap.add_argument("--job-timeout", type=float, default=90)
    args = ap.parse_args()
    if args.out:  # a fresh $OUT/sub-folder on the device: made here, not a crash at the first log line
        os.makedirs(args.out, exist_ok=True)
    if args.child:
        return child_main(args)
    man = json.load(open(os.path.join(args.dir, "manifest.json")))
    jobs = plan_jobs(man, args)
    print("%d jobs over %d kernels (%s)" % (len(jobs), len(man["cases"]), man["target"]), flush=True)
    t0 = time.time()
    results = run_children(args, jobs)
    if args.out:
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"jobs": jobs, "results": results, "secs": time.time() - t0}, f, indent=1)
    table(jobs, results)
    print("total %.1f s" % (time.time() - t0))
    bad = [r for r in results.values() if r.get("status") != "PASS"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

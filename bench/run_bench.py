# run_bench.py — on the GPU machine, in one run: moec bundles (timed by
# `moert bench`, device events, medians) side by side with PyTorch/cuBLAS on
# the same problems: cuBLAS matmul and addmm+GELU for the dense FFN; the
# per-expert loop (eager and as a CUDA graph) and torch._grouped_mm for MoE.
# Uniform and skewed routing.  Prints a table last; JSON and Markdown to OUT.
#
#   python3 bench/run_bench.py BUNDLEDIR OUTDIR      (bundles: bench/make_bench.sh)
import json, math, os, re, subprocess, sys, time
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLES, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")
PEAK_TFLOPS, HBM_TBPS = 790.0, 4.3      # measured ceilings (shared/bench anchors)


def build_moert():
    exe = "/tmp/moert-bench/moert"
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    srcs = " ".join(f"{d}/*.c" for d in ("util", "bundle", "runtime"))
    cmd = (f"cd {ROOT} && gcc -std=c17 -O2 -D_GNU_SOURCE -Iutil -Ibundle -Iruntime -Itools "
           f"-o {exe} tools/moert.c tools/opt.c {srcs} -ldl -lpthread -lm")
    subprocess.run(cmd, shell=True, check=True)
    return exe


def moert_profile(exe, bundle, tokens):
    # where the time goes: each launch step timed alone (printed to the log)
    p = subprocess.run([exe, "bench", bundle, f"--tokens={tokens}", "--iters=20", "--warmup=3",
                        "--profile"], capture_output=True, text=True)
    out = p.stdout[p.stdout.find("profile"):] if "profile" in p.stdout else p.stderr[-1000:]
    print(f"--- {os.path.basename(bundle)} T={tokens}\n{out}", flush=True)


def moert_bench(exe, bundle, tokens, skew, iters, graph):
    args = [exe, "bench", bundle, f"--tokens={tokens}", f"--iters={iters}", "--warmup=10",
            f"--skew={skew}"] + (["--graph"] if graph else [])
    p = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"median_us=([0-9.]+)", p.stdout)
    if p.returncode or not m:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        return None
    return float(m.group(1))


def bench(fn, warm=5, reps=30):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def graph_bench(fn, reps=30):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return bench(g.replay, warm=3, reps=reps)


def dense_case(M):
    K, N = 4096, 14336
    W = torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K)
    b = torch.randn(N, device=dev, dtype=torch.bfloat16) * 0.1
    X = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    r = {"mm": bench(lambda: X @ W.t()),
         "addmm_gelu": bench(lambda: F.gelu(torch.addmm(b, X, W.t()), approximate="tanh"))}
    flops = 2 * M * N * K
    return r, flops, 2 * (M * K + N * K + M * N)


def moe_dims(model):
    c = json.load(open(f"{ROOT}/models/{model}/config.json"))
    H = c["hidden_size"]
    I = c.get("moe_intermediate_size") or c["intermediate_size"]
    E = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts")
    k = c["num_experts_per_tok"]
    return H, I, E, k


def routing(T, E, k, skew):
    logits = torch.randn(T, E, device=dev)
    if skew:    # a few hot experts, as real traces show: a Zipf-like prior
        logits = logits + 1.5 * torch.log(1.0 / torch.arange(1, E + 1, device=dev, dtype=torch.float32))
    w, idx = torch.topk(torch.softmax(logits, -1), k, -1)
    return w / w.sum(-1, keepdim=True), idx


def moe_case(model, T, skew):
    H, I, E, k = moe_dims(model)
    X = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    Wgu = torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)
    Wd = torch.randn(E, H, I, device=dev, dtype=torch.bfloat16) / math.sqrt(I)
    w, idx = routing(T, E, k, skew)
    flat = idx.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    counts_host = counts.tolist()

    def loop():     # the usual eager implementation
        out = torch.zeros_like(X)
        for e in range(E):
            tok, slot = torch.where(idx == e)
            if tok.numel() == 0:
                continue
            g, u = (X[tok] @ Wgu[e].t()).chunk(2, -1)
            o = (F.silu(g) * u) @ Wd[e].t()
            out.index_add_(0, tok, o * w[tok, slot, None].to(o.dtype))
        return out

    def loop_static():   # routing known on the host: GEMMs and launches only
        xs = X[order // k]
        start, outs = 0, []
        for e, c in enumerate(counts_host):
            if c:
                g, u = (xs[start:start + c] @ Wgu[e].t()).chunk(2, -1)
                outs.append((F.silu(g) * u) @ Wd[e].t())
                start += c
        return torch.cat(outs)

    Wgu_t, Wd_t = Wgu.transpose(1, 2), Wd.transpose(1, 2)

    def grouped():
        g, u = torch._grouped_mm(X[order // k], Wgu_t, offs=offs).chunk(2, -1)
        return torch._grouped_mm((F.silu(g) * u).contiguous(), Wd_t, offs=offs)

    r = {"loop_eager": bench(loop, reps=10 if E > 64 else 30),
         "loop_graph": graph_bench(loop_static, reps=10 if E > 64 else 30)}
    try:
        r["grouped_mm"] = bench(grouped)
    except Exception as ex:
        r["grouped_mm"] = None
        print(f"grouped_mm failed: {ex}", file=sys.stderr)
    active = int((counts > 0).sum())
    flops = 6 * T * k * H * I
    touched = active * 3 * H * I * 2
    del X, Wgu, Wd, Wgu_t, Wd_t
    torch.cuda.empty_cache()
    return r, flops, touched, active, H, I, E, k


def expected_active(E, k, T):
    return E * (1 - (1 - k / E) ** T)


def main():
    exe = build_moert()
    subprocess.run([exe, "info"])
    cases = [l.split() for l in open(f"{BUNDLES}/cases.txt") if l.strip()]
    rows = []
    for name, bundle, tokens, kind, model in cases:
        T = int(tokens)
        moert_profile(exe, f"{BUNDLES}/{bundle}", T)
        for skew in ((0,) if kind == "dense" else (0, 80)):
            iters = 100 if T <= 1024 else 30
            us = moert_bench(exe, f"{BUNDLES}/{bundle}", T, skew, iters, True)
            us_plain = moert_bench(exe, f"{BUNDLES}/{bundle}", T, skew, iters, False)
            if kind == "dense":
                ref, flops, nbytes = dense_case(T)
                active = None
            else:
                ref, flops, nbytes, active, H, I, E, k = moe_case(model, T, bool(skew))
                if not skew:   # moec's routing is its own: count what uniform routing touches
                    nbytes = expected_active(E, k, T) * 3 * H * I * 2
            floor = max(flops / (PEAK_TFLOPS * 1e6), nbytes / (HBM_TBPS * 1e6))
            row = {"case": name, "T": T, "skew": bool(skew), "moec_us": us,
                   "moec_nograph_us": us_plain, "floor_us": floor,
                   "flops": flops, "bytes": nbytes, "torch": ref, "active_experts_torch": active}
            if us:
                row["moec_TFLOPs"] = flops / us / 1e6
                row["moec_GBps"] = nbytes / us / 1e3
                row["ratios"] = {k2: (v / us if v else None) for k2, v in ref.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    json.dump({"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"),
               "torch": torch.__version__, "rows": rows}, open(f"{OUT}/bench.json", "w"), indent=1)
    lines = ["| case | T | routing | moec µs (graph) | moec µs (stream) | TFLOP/s | GB/s | floor µs | "
             "PyTorch µs (moec's speed-up) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        refs = ", ".join(f"{k} {v:.0f} ({v / r['moec_us']:.2f}x)" if (v and r['moec_us']) else f"{k} -"
                         for k, v in r["torch"].items())
        us = r["moec_us"]
        lines.append(f"| {r['case']} | {r['T']} | {'skewed' if r['skew'] else 'uniform'} | "
                     f"{us if us is None else round(us, 1)} | {r['moec_nograph_us']} | "
                     f"{r.get('moec_TFLOPs', 0):.1f} | "
                     f"{r.get('moec_GBps', 0):.0f} | {r['floor_us']:.0f} | {refs} |")
    open(f"{OUT}/bench.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


main()

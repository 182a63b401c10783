# run_bench.py — on the GPU machine, in one run: moec bundles (timed by
# `moert bench`, device events, medians) side by side with PyTorch on the
# same problems, apples to apples:
#   - dense FFN up-projection: cuBLAS mm, addmm + gelu, and cuBLASLt's fused
#     bias+GELU epilogue (torch._addmm_activation);
#   - MoE: PyTorch runs moec's own routing: the per-expert row counts and the
#     token order are read back from the bundle's permute step (`moert bench
#     --dump=BUF=FILE`, the arena buffers `*.offs`, `*.rows`, `*.w`) for the
#     very inputs moert timed, so skewed rows compare the same work.  Peers:
#     the per-expert loop (eager, and replayed as a CUDA graph), grouped_mm
#     (gather + two torch._grouped_mm + SwiGLU) and grouped_mm + the weighted
#     combine;
#   - a device copy (copy_ of 2 GiB) in the same run: decode rows report the
#     bandwidth moec reached on the weights its routing touched as % of it.
# Every peer but the eager loop (and the copy) is timed as moert times moec: a CUDA graph
# replayed back to back, events around each replay, the median (graphed()).
# With --profile each bundle's steps are also timed alone (moert bench
# --profile: cuEvents around each launch) and printed and saved.  Prints a
# short table last; JSON and Markdown to OUT.
#
#   python3 bench/run_bench.py BUNDLEDIR OUTDIR [--profile] [--only=REGEX]
#                                        (bundles: bench/make_bench.sh)
import json, math, os, re, struct, subprocess, sys, time
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
dev = torch.device("cuda")
PEAK_TFLOPS = 790.0     # measured ceiling (shared/bench anchors)
DECODE_T = 64


def build_moert():
    """moert built by tests/gpu/build_moert.sh (the one list of its sources)."""
    exe = "/tmp/moert-bench/moert"
    subprocess.run([os.path.join(ROOT, "tests/gpu/build_moert.sh"), exe], check=True)
    return exe


# --- the bundle's manifest (docs/bundle.md §1-2), read here without moec ------

def manifest(path):
    b = open(path, "rb").read(1 << 20)
    n = struct.unpack_from("<I", b, 12)[0]
    for i in range(n):
        e = 64 + 64 * i
        name = b[e:e + 32].rstrip(b"\0").decode()
        off, size = struct.unpack_from("<QQ", b, e + 32)
        if name == "manifest":
            with open(path, "rb") as f:
                f.seek(off)
                return f.read(size).decode()
    raise ValueError(f"{path}: no manifest")


def moe_buffers(text, E):
    """The first MoE's permute outputs: (offs, rows, w) buffer names, or None."""
    bufs = {m.group(1): m.group(2) for m in re.finditer(r"^buffer (\S+) offset=\d+ bytes=(\S+)$",
                                                        text, re.M)}
    for name, size in bufs.items():
        if name.endswith(".offs") and size == str(4 * (E + 1)):
            base = name[:-5]
            if base + ".rows" in bufs and base + ".w" in bufs:
                return name, base + ".rows", base + ".w"
    return None


# --- moert -------------------------------------------------------------------

def moert_bench(exe, bundle, tokens, skew, iters, graph, extra=()):
    a = [exe, "bench", bundle, f"--tokens={tokens}", f"--iters={iters}", "--warmup=10",
         f"--skew={skew}"] + (["--graph"] if graph else []) + list(extra)
    p = subprocess.run(a, capture_output=True, text=True)
    m = re.search(r"median_us=([0-9.]+)", p.stdout)
    if p.returncode or not m:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        return None, p.stdout
    return float(m.group(1)), p.stdout


def moert_profile(exe, bundle, tokens, skew):
    # each launch step timed alone (cuEvents around each launch; moert_profile)
    us, out = moert_bench(exe, bundle, tokens, skew, 20, False, ["--profile"])
    text = out[out.find("profile"):] if "profile" in out else ""
    print(f"--- profile {os.path.basename(bundle)} T={tokens} skew={skew}\n{text}", flush=True)
    steps = []
    for m in re.finditer(r"^  (\S+)\s+([0-9.]+)\s+([0-9.]+)%$", text, re.M):
        steps.append({"step": m.group(1), "us": float(m.group(2))})
    return steps


def moec_routing(exe, bundle, tokens, skew, E, k):
    """moec's routing for the inputs moert bench uses: offs [E+1], rows [T*k], w [T*k]."""
    names = moe_buffers(manifest(bundle), E)
    if not names:
        return None
    files = [f"/tmp/moert-bench/{os.path.basename(bundle)}.{i}" for i in range(3)]
    us, _ = moert_bench(exe, bundle, tokens, skew, 1, False,
                        [f"--dump={n}={f}" for n, f in zip(names, files)])
    if us is None:
        return None
    offs = torch.frombuffer(bytearray(open(files[0], "rb").read()), dtype=torch.int32)
    rows = torch.frombuffer(bytearray(open(files[1], "rb").read()), dtype=torch.int32)
    w = torch.frombuffer(bytearray(open(files[2], "rb").read()), dtype=torch.float32)
    n = tokens * k
    if offs.numel() != E + 1 or int(offs[-1]) != n or rows.numel() < n or w.numel() < n:
        print(f"{bundle}: routing buffers do not look like E={E} k={k} T={tokens}", file=sys.stderr)
        return None
    return offs.clone(), rows[:n].clone().long(), w[:n].clone()


# --- PyTorch ------------------------------------------------------------------

def per_call(fn, warm=5, reps=30):
    """Events around one call and a synchronise after each: only for the eager
    loop, which synchronises itself (it asks the host which experts have rows)."""
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


def graphed(fn, warm=10, reps=50):
    """As `moert bench --graph` times moec: fn captured in a CUDA graph, replayed
    back to back with events around each replay and no synchronise between, the
    median.  Timing PyTorch per call instead lets the host's launch gap count
    against it (dense mm at M=4096: 646 us that way, 607 us this way)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(warm):
        g.replay()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
    del g
    return ts[len(ts) // 2]


def copy_rate():
    """Device-to-device copy of 2 GiB: bytes read + written per second (TB/s).
    Per call, not graphed: captured in a graph the copy becomes a memcpy node
    that ran at 2.77 TB/s against 4.1-4.2 eagerly (H200, session 38); one 1 ms
    call hides the launch gap anyway."""
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    us = per_call(lambda: dst.copy_(src), warm=3, reps=20)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / us / 1e6


def dense_case(M):
    K, N = 4096, 14336
    W = torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K)
    b = torch.randn(N, device=dev, dtype=torch.bfloat16) * 0.1
    X = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    Wt = W.t()
    r = {"mm": graphed(lambda: X @ Wt),
         "addmm_gelu": graphed(lambda: F.gelu(torch.addmm(b, X, Wt), approximate="tanh")),
         "addmm_act": graphed(lambda: torch._addmm_activation(b, X, Wt, use_gelu=True))}
    return r, 2 * M * N * K, 2 * (M * K + N * K + M * N)


def moe_dims(model):
    c = json.load(open(f"{ROOT}/models/{model}/config.json"))
    H = c["hidden_size"]
    I = c.get("moe_intermediate_size") or c["intermediate_size"]
    E = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts")
    k = c.get("num_experts_per_tok") or c.get("experts_per_token")
    shared = (c.get("n_shared_experts") or 0) * 3 * H * I * 2
    return H, I, E, k, shared


def moe_case(model, T, route):
    """PyTorch on moec's routing: offs [E+1], rows (pair = token*k + slot, by expert), w [T*k]."""
    H, I, E, k, _ = moe_dims(model)
    offs, rows, wflat = route
    X = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    Wgu = torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)
    Wd = torch.randn(E, H, I, device=dev, dtype=torch.bfloat16) / math.sqrt(I)
    counts_host = (offs[1:] - offs[:-1]).tolist()
    rows_d = rows.to(dev)
    tok = rows_d // k
    w_rows = wflat.to(dev)[rows_d].to(torch.bfloat16)[:, None]
    ends = offs[1:].to(dev, torch.int32)
    ids = torch.empty(T * k, dtype=torch.long)          # [T, k] as moec chose
    for e in range(E):
        ids[rows[offs[e]:offs[e + 1]]] = e
    idx = ids.view(T, k).to(dev)
    w = wflat.view(T, k).to(dev)

    def loop():     # the usual eager implementation
        out = torch.zeros_like(X)
        for e in range(E):
            t, slot = torch.where(idx == e)
            if t.numel() == 0:
                continue
            g, u = (X[t] @ Wgu[e].t()).chunk(2, -1)
            o = (F.silu(g) * u) @ Wd[e].t()
            out.index_add_(0, t, o * w[t, slot, None].to(o.dtype))
        return out

    def loop_static():   # routing known on the host: GEMMs and launches only
        xs = X[tok]
        start, outs = 0, []
        for e, c in enumerate(counts_host):
            if c:
                g, u = (xs[start:start + c] @ Wgu[e].t()).chunk(2, -1)
                outs.append((F.silu(g) * u) @ Wd[e].t())
                start += c
        return torch.cat(outs)

    Wgu_t, Wd_t = Wgu.transpose(1, 2), Wd.transpose(1, 2)

    def grouped():
        g, u = torch._grouped_mm(X[tok], Wgu_t, offs=ends).chunk(2, -1)
        return torch._grouped_mm((F.silu(g) * u).contiguous(), Wd_t, offs=ends)

    def grouped_block():    # + the routing weights and the combine, as moec does
        return torch.zeros_like(X).index_add_(0, tok, grouped() * w_rows)

    many = E > 64
    r = {"loop_eager": per_call(loop, warm=2 if many else 5, reps=5 if many else 30),
         "loop_graph": graphed(loop_static, reps=10 if many else 50)}
    for name, fn in (("grouped_mm", grouped), ("grouped_block", grouped_block)):
        try:
            r[name] = graphed(fn)
        except Exception as ex:     # not capturable: per call, and say so
            print(f"{name}: no CUDA graph ({ex}); timed per call", file=sys.stderr)
            try:
                torch.cuda.synchronize()
                r[name + "_percall"] = per_call(fn)
            except Exception as ex2:
                r[name] = None
                print(f"{name} failed: {ex2}", file=sys.stderr)
    active = sum(1 for c in counts_host if c)
    del X, Wgu, Wd, Wgu_t, Wd_t
    torch.cuda.empty_cache()
    return r, active


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) != 2:
        sys.exit("usage: run_bench.py BUNDLEDIR OUTDIR [--profile] [--only=REGEX]")
    BUNDLES, OUT = args
    PROFILE = "--profile" in flags
    ONLY = next((f.split("=", 1)[1] for f in flags if f.startswith("--only=")), None)
    os.makedirs(OUT, exist_ok=True)
    exe = build_moert()
    subprocess.run([exe, "info"])
    copy_tbps = copy_rate()
    print(f"copy rate: {copy_tbps:.3f} TB/s (2 GiB device copy, read + written)", flush=True)
    cases = [l.split() for l in open(f"{BUNDLES}/cases.txt") if l.strip()]
    rows = []
    for name, bundle, tokens, kind, model in cases:
        if ONLY and not re.search(ONLY, name):
            continue
        T, path = int(tokens), f"{BUNDLES}/{bundle}"
        for skew in ((0,) if kind == "dense" else (0, 80)):
            iters = 100 if T <= 1024 else 30
            us, _ = moert_bench(exe, path, T, skew, iters, True)
            us_plain, _ = moert_bench(exe, path, T, skew, iters, False)
            prof = moert_profile(exe, path, T, skew) if PROFILE else None
            row = {"case": name, "T": T, "skew": bool(skew), "moec_us": us, "moec_nograph_us": us_plain}
            if kind == "dense":
                ref, flops, nbytes = dense_case(T)
                wbytes = 14336 * 4096 * 2
            else:
                H, I, E, k, shared = moe_dims(model)
                route = moec_routing(exe, path, T, skew, E, k)
                if route is None:
                    print(f"{name}: moec's routing not readable; skipped", file=sys.stderr)
                    continue
                ref, active = moe_case(model, T, route)
                flops = 6 * T * k * H * I
                wbytes = active * 3 * H * I * 2 + shared
                nbytes = wbytes + 2 * 2 * T * H
                row["active_experts"] = active
            row.update({"flops": flops, "bytes": nbytes, "torch": ref, "profile": prof,
                        "floor_us": max(flops / (PEAK_TFLOPS * 1e6), nbytes / (copy_tbps * 1e6))})
            if us:
                row["moec_TFLOPs"] = flops / us / 1e6
                row["moec_GBps"] = nbytes / us / 1e3
                row["ratios"] = {k2: (v / us if v else None) for k2, v in ref.items()}
                if T <= DECODE_T:
                    row["copy_pct"] = 100 * (wbytes / us / 1e6) / copy_tbps
            rows.append(row)
            print(json.dumps(row), flush=True)
    json.dump({"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d"),
               "torch": torch.__version__, "copy_TBps": copy_tbps, "rows": rows},
              open(f"{OUT}/bench.json", "w"), indent=1)
    lines = [f"copy rate {copy_tbps:.2f} TB/s; PyTorch runs moec's routing (counts and token order "
             f"read back from the bundle)", "",
             "| case | T | routing | moec µs (graph) | moec µs (stream) | TFLOP/s | GB/s | "
             "% of copy BW | PyTorch µs (moec's speed-up) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        us = r["moec_us"]
        refs = ", ".join(f"{k} {v:.0f} ({v / us:.2f}x)" if (v and us) else f"{k} -"
                         for k, v in r["torch"].items())
        pct = f"{r['copy_pct']:.0f}%" if "copy_pct" in r else "–"
        lines.append(f"| {r['case']} | {r['T']} | {'skewed' if r['skew'] else 'uniform'} | "
                     f"{us if us is None else round(us, 1)} | {r['moec_nograph_us']} | "
                     f"{r.get('moec_TFLOPs', 0):.1f} | {r.get('moec_GBps', 0):.0f} | {pct} | {refs} |")
    open(f"{OUT}/bench.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    # the short table, last
    print(f"\ncase                         moec_us   best_peer_us (peer)          ratio  %copyBW"
          f"   (copy {copy_tbps:.2f} TB/s)")
    for r in rows:
        peers = {k: v for k, v in r["torch"].items() if v}
        best = min(peers, key=peers.get) if peers else None
        us = r["moec_us"]
        tag = r["case"] + ("/skew" if r["skew"] else "")
        print(f"{tag:28s} {us or 0:9.1f}   {peers.get(best, 0):9.1f} ({best or '-':14s})"
              f"   {(peers[best] / us) if (best and us) else 0:5.2f}x"
              f"  {('%5.0f%%' % r['copy_pct']) if 'copy_pct' in r else '    –'}")


if __name__ == "__main__":
    main()

# decode_table.py MOERT DIR [T] — on the GPU machine (run_decode.sh calls it):
# every bundle of DIR/cases.txt ("name bundle pair", make_decode.sh) timed at
# T tokens (default 16) as a CUDA graph (moert bench --graph, 300 runs,
# median), against a device copy measured in the same run, and reported
# over the weight bytes it touched:
#   - a weight a launch step reads counts once, in full, unless the step is
#     grouped over experts (it reads a `*.offs` buffer) and the weight's
#     first dimension is the expert count E: then only the experts that got
#     rows count (read back with moert bench --dump=OFFS=FILE for the very
#     inputs it timed); packed bytes for the quantised weights (values,
#     scales, zero points as the kernels read them);
#   - GB/s = touched bytes / median, % of copy = that over the copy rate
#     (bytes read + written per second of a 1 GiB device-to-device copy,
#     torch when it is installed, else not reported);
#   - each step of an MoE block's plan timed alone (moert bench --profile)
#     with its own touched bytes, so the grouped GEMMs' bandwidth shows
#     without the router, the permute and the norms.
# Exit 0, 1 when a bench failed.
import os, re, struct, subprocess, sys

if len(sys.argv) not in (3, 4):
    sys.exit("usage: decode_table.py MOERT DIR [T]")
MOERT, DIR = sys.argv[1], sys.argv[2]
T = int(sys.argv[3]) if len(sys.argv) == 4 else 16
TMP = os.environ.get("TMPDIR", "/tmp")


def manifest(path):
    """The bundle's manifest text (docs/bundle.md §1-2)."""
    b = open(path, "rb").read(1 << 20)
    n = struct.unpack_from("<I", b, 12)[0]
    for i in range(n):
        e = 64 + 64 * i
        if b[e:e + 32].rstrip(b"\0").decode() == "manifest":
            off, size = struct.unpack_from("<QQ", b, e + 32)
            with open(path, "rb") as f:
                f.seek(off)
                return f.read(size).decode()
    raise ValueError(f"{path}: no manifest")


def moert(args, timeout=120):
    try:
        p = subprocess.run([MOERT] + args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return (p.stdout if p.returncode == 0 else None), p.stdout[-1500:] + p.stderr[-1500:]


def copy_rate():
    """TB/s of a 1 GiB device-to-device copy (read + written), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return 2 * n / ts[len(ts) // 2] / 1e6


def plan(text):
    """weights {name: (bytes, first dim)}, offs buffer (name, E) or None, launch steps [(kernel, args)]."""
    weights, offs, steps = {}, None, []
    for line in text.splitlines():
        w = line.split()
        if line.startswith("weight "):
            nb = int(re.search(r"bytes=(\d+)", line).group(1))
            weights[w[1]] = (nb, int(w[3].split(",")[0]) if w[3][0].isdigit() else 1)
        elif line.startswith("buffer ") and w[1].endswith(".offs") and w[3][6:].isdigit():
            offs = offs or (w[1], int(w[3][6:]) // 4 - 1)
        elif line.startswith("launch "):
            args = re.search(r"args=(\S+)", line)
            steps.append((w[1], args.group(1).split(",") if args else []))
    return weights, offs, steps


def touched(weights, offs, active, args):
    grouped = offs is not None and f"buf:{offs[0]}" in args
    total = 0
    for a in args:
        if a.startswith("w:") and a[2:] in weights:
            nb, first = weights[a[2:]]
            total += nb * active // offs[1] if grouped and first == offs[1] else nb
    return total


def active_experts(bundle, offs):
    f = os.path.join(TMP, os.path.basename(bundle) + ".offs")
    out, err = moert(["bench", bundle, f"--tokens={T}", "--iters=1", f"--dump={offs[0]}={f}"])
    if out is None:
        print(f"{bundle}: --dump failed: {err}", file=sys.stderr)
        return None
    o = struct.unpack(f"<{offs[1] + 1}i", open(f, "rb").read()[:4 * (offs[1] + 1)])
    return sum(1 for e in range(offs[1]) if o[e + 1] > o[e])


def main():
    rc = 0
    tbps = copy_rate()
    print(f"copy rate: {tbps:.3f} TB/s (1 GiB device copy, read + written)" if tbps else
          "copy rate: not measured (no torch)", flush=True)
    rows, prof = [], []
    for line in open(os.path.join(DIR, "cases.txt")):
        if not line.strip():
            continue
        name, bundle, pair = line.split()
        bundle = os.path.join(DIR, bundle)
        weights, offs, steps = plan(manifest(bundle))
        out, err = moert(["bench", bundle, f"--tokens={T}", "--iters=300", "--graph"])
        m = re.search(r"median_us=([0-9.]+)", out or "")
        if not m:
            print(f"FAIL {name}: {err}", flush=True)
            rc = 1
            continue
        us = float(m.group(1))
        active = active_experts(bundle, offs) if offs else None
        if offs and active is None:
            rc = 1
            continue
        seen, nb = set(), 0
        for _, args in steps:	# each weight once over the plan
            fresh = [a for a in args if a not in seen]
            seen.update(fresh)
            nb += touched(weights, offs, active or 0, fresh + [a for a in args if a.startswith("buf:")])
        rows.append((name, us, nb, active, offs[1] if offs else None, pair))
        print(f"{name}: T={T} {us:.1f} us, {nb / 1e6:.1f} MB touched"
              + (f" ({active} of {offs[1]} experts)" if offs else "")
              + f", {nb / us / 1e3:.0f} GB/s" + (f", {100 * nb / us / 1e6 / tbps:.0f}% of copy" if tbps else ""),
              flush=True)
        if not offs:
            continue	# steps alone: the MoE blocks only
        out, err = moert(["bench", bundle, f"--tokens={T}", "--iters=30", "--profile"])
        for m in re.finditer(r"^  (\S+)\s+([0-9.]+)\s+([0-9.]+)%$", out or "", re.M):
            for k, args in steps:
                if k == m.group(1) and any(a.startswith("w:") for a in args):
                    sb = touched(weights, offs, active or 0, args)
                    if sb > 1 << 20:
                        prof.append((name, k, float(m.group(2)), sb))
    pairs = {r[0]: r[1] for r in rows}
    print()
    print(f"{'case':<36} {'us':>9} {'MB':>8} {'experts':>8} {'GB/s':>7} {'% copy':>7} vs bf16")
    for name, us, nb, active, E, pair in rows:
        pct = f"{100 * nb / us / 1e6 / tbps:.0f}%" if tbps else "-"
        x = f"{pairs[pair] / us:.2f}x" if pair in pairs else "-"
        print(f"{name:<36} {us:>9.1f} {nb / 1e6:>8.1f} {f'{active}/{E}' if E else '-':>8} "
              f"{nb / us / 1e3:>7.0f} {pct:>7} {x}")
    print()
    print("steps alone (moert bench --profile), weight bytes touched by each:")
    for name, k, us, sb in prof:
        pct = f"{100 * sb / us / 1e6 / tbps:.0f}%" if tbps else "-"
        print(f"  {name:<34} {k:<28} {us:>9.1f} us {sb / 1e6:>8.1f} MB {sb / us / 1e3:>6.0f} GB/s {pct:>5}")
    return rc


sys.exit(main())

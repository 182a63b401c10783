#!/usr/bin/env python3
"""hf_e2e.py — moert.hf.patch end to end: small Mixtral, Qwen3-MoE and
DeepSeek-V3 models (random weights, real routing), their FFN blocks compiled
by moec, greedy generation eager vs patched, and decode timing.

Here (no GPU; torch + transformers, e.g. /work/venvs/tf5, and a built moec):

    /work/venvs/tf5/bin/python tests/gpu/hf_e2e.py prepare .carry/hf_e2e

  writes .carry/hf_e2e/<family>/{config.json, model.safetensors, layerN.moeb}
  for every decoder layer (sm_90a, for the H200), model.moeb (every layer in
  one bundle: moec compile --layers=all), and prompt.json: 3 layers each,
  hidden 256, 8 experts; about 45 MiB.

There (the GPU machine: torch, transformers, no network):

    python3 tests/gpu/hf_e2e.py run .carry/hf_e2e --out $OUT [--whole]

  per family: greedy generation of 32 tokens eager and patched must agree,
  or the first divergence must be a near-tie: on the common prefix, eager's
  margin for its token over the patched model's is within how far the
  bundles' numerics moved the logits (max |eager - patched| + 1 bf16 ulp;
  random models have logit margins of a few ulps); every patched layer's FFN output on the prompt is
  compared with the eager module's (rel L2, max abs); one program captured
  by torch.cuda.graph must replay what direct runs give; per-token decode time
  eager / patched / torch.compile (median of 3, ms).  Writes hf_e2e.json and
  hf_e2e.md to --out; exit 0 when every family passes, 1 otherwise.  With
  --whole the model is patched with model.moeb (one bundle, program layer.N
  for layer N) instead of the layerN.moeb files.

moert is imported from python/ of this checkout with the libmoert.so that
`run` compiles there (cc, util/ bundle/ runtime/) unless MOERT_LIBRARY is set
or the package is installed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 32
PROMPT = 16


def families():
    """name -> (Config class name, CausalLM class name, config kwargs)."""
    common = dict(vocab_size=1024, hidden_size=256, num_attention_heads=4, max_position_embeddings=512,
                  tie_word_embeddings=False, initializer_range=0.05)
    return {
        "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                    dict(common, num_hidden_layers=3, num_key_value_heads=2, head_dim=64, intermediate_size=128,
                         num_local_experts=8, num_experts_per_tok=2, rms_norm_eps=1e-5)),
        "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                      dict(common, num_hidden_layers=3, num_key_value_heads=2, head_dim=64,
                           intermediate_size=512, moe_intermediate_size=128, num_experts=8,
                           num_experts_per_tok=2, norm_topk_prob=True, rms_norm_eps=1e-6)),
        "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                        dict(common, num_hidden_layers=3, num_key_value_heads=4, kv_lora_rank=64,
                             q_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                             head_dim=16, intermediate_size=512, moe_intermediate_size=128,
                             n_routed_experts=8, num_experts_per_tok=4, n_group=4, topk_group=2,
                             n_shared_experts=1, routed_scaling_factor=2.5, first_k_dense_replace=1,
                             norm_topk_prob=True, rms_norm_eps=1e-6)),
    }


# --- prepare (no GPU) -------------------------------------------------------------

def prepare(args):
    import torch
    import transformers

    os.makedirs(args.dir, exist_ok=True)
    moec = args.moec or os.path.join(ROOT, "build", "tools", "moec")
    for fi, (name, (cfg_cls, lm_cls, kw)) in enumerate(families().items()):
        d = os.path.join(args.dir, name)
        torch.manual_seed(1000 + fi)
        cfg = getattr(transformers, cfg_cls)(**kw)
        model = getattr(transformers, lm_cls)(cfg).to(torch.bfloat16)
        model.save_pretrained(d)
        for n in range(cfg.num_hidden_layers):
            out = os.path.join(d, "layer%d.moeb" % n)
            t0 = time.time()
            subprocess.run([moec, "compile", os.path.join(d, "config.json"), "--layer", str(n),
                            "--arch=sm_90a", "-o", out], check=True)
            print("%s layer %d: %.1f s, %d bytes" % (name, n, time.time() - t0, os.path.getsize(out)))
        out = os.path.join(d, "model.moeb")
        t0 = time.time()
        subprocess.run([moec, "compile", os.path.join(d, "config.json"), "--layers=all",
                        "--arch=sm_90a", "-o", out], check=True)
        print("%s whole: %.1f s, %d bytes" % (name, time.time() - t0, os.path.getsize(out)))
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(3, families()["mixtral"][2]["vocab_size"], (1, PROMPT), generator=g)
    with open(os.path.join(args.dir, "prompt.json"), "w") as f:
        json.dump({"input_ids": prompt.tolist(), "steps": STEPS}, f)
    total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(args.dir) for x in fs)
    print("prepared %s: %.1f MiB" % (args.dir, total / 2**20))


# --- run (GPU) --------------------------------------------------------------------

def import_moert():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import moert  # noqa: F401  (installed, or MOERT_LIBRARY set)
        return sys.modules["moert"]
    except ImportError:
        pass
    lib = os.path.join(os.environ.get("TMPDIR", "/tmp"), "hf_e2e_libmoert.so")
    srcs = []
    for sub in ("util", "bundle", "runtime"):
        d = os.path.join(ROOT, sub)
        srcs += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".c"))
    subprocess.run(["cc", "-std=gnu17", "-O2", "-fPIC", "-shared", "-D_GNU_SOURCE"]
                   + ["-I" + os.path.join(ROOT, s) for s in ("util", "bundle", "runtime")]
                   + ["-Wl,--version-script=" + os.path.join(ROOT, "runtime", "moert.map"), "-o", lib]
                   + srcs + ["-ldl", "-lpthread", "-lm"], check=True)
    os.environ["MOERT_LIBRARY"] = lib
    import moert
    return moert


def greedy(model, ids, steps):
    import torch
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    return out.sequences[0, ids.shape[1]:].tolist(), [s[0].float() for s in out.scores]


def decode_ms(model, ids, steps, reps=3):
    """Per-token decode time: (generate(steps) - generate(1)) / (steps - 1), median of reps."""
    import torch

    def t(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    t(steps)  # warm up
    return statistics.median((t(steps) - t(1)) * 1e3 / (steps - 1) for _ in range(reps))


def graph_check(prog, hidden):
    """prog.run captured by torch.cuda.graph: replays give what direct runs
    give, for the captured input and for new values written into it."""
    import torch
    x = torch.randn(8, hidden, device="cuda", dtype=torch.bfloat16)
    xs = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):      # warm-up off the capture, as torch advises
        prog.run(xs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ys = prog.run(xs)
    ok = True
    for v in (x, torch.randn_like(x)):
        xs.copy_(v)
        g.replay()
        ref = prog.run(v)
        torch.cuda.synchronize()
        ok = ok and torch.equal(ys, ref)
    return ok


def last_logits(model, ids):
    import torch
    with torch.no_grad():
        return model(ids).logits[0, -1].float()


def ulp_bf16(x):
    import math
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


def ffn_errors(model, handle, ids):
    """Each patched layer: bundle vs eager FFN block on the prompt's hidden states."""
    import torch
    from moert import hf
    layers = hf.decoder_layers(model)
    handle.unpatch()
    seen, hooks = {}, []
    for i in handle.programs:
        hooks.append(layers[i].post_attention_layernorm.register_forward_pre_hook(
            lambda mod, a, i=i: seen.__setitem__(i, a[0].detach().clone())))
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    res = {}
    for i, prog in handle.programs.items():
        x = seen[i].reshape(-1, seen[i].shape[-1]).contiguous()
        lay = layers[i]
        with torch.no_grad():
            ref = (x + lay.mlp(lay.post_attention_layernorm(x.unsqueeze(0))).reshape(x.shape)).float()
            y = prog.run(x).float()
        torch.cuda.synchronize()
        res[i] = dict(rel_l2=float((y - ref).norm() / ref.norm()), max_abs=float((y - ref).abs().max()))
    return res


def run_family(moert, name, d, ids, steps, bind, whole=False):
    import torch
    from moert import hf
    from transformers import AutoModelForCausalLM

    r = dict(family=name)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).cuda().eval()
    ids = ids.cuda()
    eager, _ = greedy(model, ids, steps)
    r["eager_ms"] = decode_ms(model, ids, steps)
    h = hf.patch(model, os.path.join(d, "model.moeb") if whole else d, bind=bind)
    r["layers"] = sorted(h.programs)
    r["bound"] = {i: v for i, v in h.bound.items()}
    r["code"] = h.programs[r["layers"][0]].code
    r["torch_graph_ok"] = graph_check(h.programs[r["layers"][-1]], model.config.hidden_size)
    patched, _ = greedy(model, ids, steps)
    r["patched_ms"] = decode_ms(model, ids, steps)
    div = next((k for k in range(steps) if eager[k] != patched[k]), None)
    if div is not None:   # both models' logits on the common prefix
        prefix = torch.cat([ids, torch.tensor([eager[:div]], dtype=ids.dtype, device=ids.device)], 1)
        p_logits = last_logits(model, prefix)
    r["ffn"] = ffn_errors(model, h, ids)   # unpatches
    r["eager_tokens"], r["patched_tokens"] = eager, patched
    r["first_divergence"] = div
    if div is None:
        r["status"] = "pass"
    else:
        e_logits = last_logits(model, prefix)
        # explained when eager's preference for its token over the patched
        # model's choice is within how far the FFN numerics moved the logits
        margin = float(e_logits[eager[div]] - e_logits[patched[div]])
        delta = float((e_logits - p_logits).abs().max())
        top = float(e_logits.max())
        r.update(margin=margin, delta=delta, margin_ulps=margin / ulp_bf16(top))
        r["status"] = "near-tie" if margin <= delta + ulp_bf16(top) else "FAIL"
    try:
        model.forward = torch.compile(model.forward, dynamic=True)
        r["compiled_ms"] = decode_ms(model, ids, steps)
    except Exception as e:  # noqa: BLE001  (reported, not fatal)
        r["compiled_ms"] = None
        r["compile_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    del model
    torch.cuda.empty_cache()
    return r


def run(args):
    import torch
    moert = import_moert()
    with open(os.path.join(args.dir, "prompt.json")) as f:
        p = json.load(f)
    ids = torch.tensor(p["input_ids"])
    steps = args.steps or p["steps"]
    results = []
    for name in families():
        d = os.path.join(args.dir, name)
        try:
            r = run_family(moert, name, d, ids, steps, not args.no_bind, args.whole)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            r = dict(family=name, status="FAIL", error="%s: %s" % (type(e).__name__, e))
        print(json.dumps(r, default=str))
        results.append(r)
    lines = ["| family | layers | tokens (32 greedy) | FFN rel L2 (max over layers) | torch.cuda.graph | "
             "eager ms/token | patched ms/token | torch.compile ms/token |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append("| %s | | FAIL: %s | | | | | |" % (r["family"], r["error"]))
            continue
        tok = "identical" if r["status"] == "pass" else (
            "%s at step %d (eager margin %.3g = %.1f ulps, logits moved by %.3g)" % (
                r["status"], r["first_divergence"], r["margin"], r["margin_ulps"], r["delta"]))
        fmt = lambda v: "%.2f" % v if v is not None else "n/a"  # noqa: E731
        lines.append("| %s | %d | %s | %.2e | %s | %s | %s | %s |" % (
            r["family"], len(r["layers"]), tok, max(e["rel_l2"] for e in r["ffn"].values()),
            "replays match" if r["torch_graph_ok"] else "DIFFERS", fmt(r["eager_ms"]), fmt(r["patched_ms"]), fmt(r["compiled_ms"])))
    dev = torch.cuda.get_device_name(0)
    md = "hf_e2e on %s%s, torch %s, transformers %s\n\n%s\n" % (
        dev, " (whole-model bundles)" if args.whole else "", torch.__version__, __import__("transformers").__version__, "\n".join(lines))
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "hf_e2e.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
        with open(os.path.join(args.out, "hf_e2e.md"), "w") as f:
            f.write(md)
    return 0 if all(r["status"] in ("pass", "near-tie") and r.get("torch_graph_ok") for r in results) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("dir")
    a.add_argument("--moec")
    b = sub.add_parser("run")
    b.add_argument("dir")
    b.add_argument("--steps", type=int)
    b.add_argument("--out")
    b.add_argument("--no-bind", action="store_true",
                   help="use the bundles' own weight copies, bind none of the model's tensors")
    b.add_argument("--whole", action="store_true",
                   help="patch with <family>/model.moeb, every layer in one bundle")
    args = ap.parse_args()
    return prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main() or 0)

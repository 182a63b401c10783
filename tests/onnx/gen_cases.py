#!/usr/bin/env python3
"""Generate moec's own ONNX test cases (committed under tests/onnx/cases/):
what ONNX's node tests do not cover at opsets 13..23 -- Einsum, the
com.microsoft ops (SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization,
MatMulNBits, MoE, QMoE), shape subgraphs whose dims are only known at run
time, external data and model-local functions.

Each case is a folder in the backend-test layout.  References come from
numpy implementations written from the op schemas; where onnxruntime's CPU
kernels implement the same configuration they are checked against it here
(ORT's CPU QMoE always renormalises the top-k weights, so QMoE cases set
normalize_routing_weights=1).  Seeded: the output is reproducible.

usage: python3 tests/onnx/gen_cases.py [OUTDIR]   (default tests/onnx/cases)
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

try:
    import onnxruntime as ort
except ImportError:
    ort = None

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "cases")
RNG = np.random.default_rng(20261129)
F = TP.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=18, ms=False, functions=(), vinfo=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(vinfo))
    ops = [h.make_opsetid("", opset)]
    if ms:
        ops.append(h.make_opsetid("com.microsoft", 1))
    for f in functions:
        ops.append(h.make_opsetid(f.domain, 1))
    m = h.make_model(g, opset_imports=ops, functions=list(functions), producer_name="moec-gen")
    m.ir_version = 9
    return m


def vi(name, shape, t=F):
    return h.make_tensor_value_info(name, t, shape)


def ort_run(m, feeds, path=None):
    if ort is None:
        return None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    src = path if path else m.SerializeToString()
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def save(name, m, sets, external=None):
    """sets: list of (inputs dict in graph order, outputs list)."""
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if external:
        onnx.save_model(m, os.path.join(d, "model.onnx"), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=external, size_threshold=0)
    else:
        onnx.save_model(m, os.path.join(d, "model.onnx"))
    for i, (ins, outs) in enumerate(sets):
        s = os.path.join(d, "test_data_set_%d" % i)
        os.makedirs(s)
        for j, (k, v) in enumerate(ins.items()):
            onnx.save_tensor(nh.from_array(np.asarray(v), k), os.path.join(s, "input_%d.pb" % j))
        for j, v in enumerate(outs):
            name_j = m.graph.output[j].name
            onnx.save_tensor(nh.from_array(np.asarray(v), name_j), os.path.join(s, "output_%d.pb" % j))
    print("wrote", name)


def check(name, got, want, tol=1e-5):
    if got is None:
        return
    for a, b in zip(got, want):
        err = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max() if np.size(b) else 0
        if not err <= tol * max(1.0, np.abs(b).max() if np.size(b) else 1):
            raise SystemExit("%s: onnxruntime disagrees with the reference by %g" % (name, err))


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# --- Einsum ----------------------------------------------------------------

EINSUM = [
    ("einsum_matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
    ("einsum_batch_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("einsum_attention_scores", "bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("einsum_trans_b", "ij,kj->ik", [(3, 4), (5, 4)]),
    ("einsum_inner", "i,i", [(5,), (5,)]),
    ("einsum_row_sum", "ij->i", [(3, 4)]),
    ("einsum_transpose", "ij->ji", [(3, 4)]),
    ("einsum_ellipsis_broadcast", "...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),
    ("einsum_implicit", "ik,jk", [(3, 4), (5, 4)]),
    ("einsum_two_contracted", "abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),
    ("einsum_out_transposed", "bsh,he->ebs", [(2, 3, 4), (4, 5)]),
    ("einsum_summed_private", "ij,jk->k", [(3, 4), (4, 5)]),
]


def gen_einsum():
    for name, eq, shapes in EINSUM:
        xs = [randn(*s) for s in shapes]
        names = ["x%d" % i for i in range(len(xs))]
        y = np.einsum(eq, *xs).astype(np.float32)
        m = model([h.make_node("Einsum", names, ["y"], equation=eq)],
                  [vi(n, list(x.shape)) for n, x in zip(names, xs)], [vi("y", list(y.shape))])
        got = ort_run(m, dict(zip(names, xs)))
        check(name, got, [y])
        save(name, m, [(dict(zip(names, xs)), [y])])


# --- com.microsoft norms ----------------------------------------------------

def rms(x, g, eps):
    inv = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)
    return (x * inv * g).astype(np.float32), inv.astype(np.float32)


def gen_norms():
    x, g = randn(2, 3, 8), randn(8, scale=0.5) + 1
    y, inv = rms(x, g, 1e-6)
    for dom in ("", "com.microsoft"):
        n = h.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv"], domain=dom,
                        axis=-1, epsilon=1e-6)
        m = model([n], [vi("x", [2, 3, 8])], [vi("y", [2, 3, 8]), vi("inv", [2, 3, 1])],
                  [nh.from_array(g, "g")], ms=dom != "")
        if dom == "":
            check("ms_simplified_ln", ort_run(m, {"x": x}), [y, inv])
        save("ms_simplified_ln" + ("_msdomain" if dom else ""), m, [({"x": x}, [y, inv])])
    skip, bias = randn(2, 3, 8), randn(8, scale=0.1)
    s = x + skip + bias
    y, inv = rms(s, g, 1e-5)
    n = h.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g", "b"],
                    ["y", "", "inv", "sum"], domain="com.microsoft", epsilon=1e-5)
    m = model([n], [vi("x", [2, 3, 8]), vi("skip", [2, 3, 8])],
              [vi("y", [2, 3, 8]), vi("inv", [2, 3, 1]), vi("sum", [2, 3, 8])],
              [nh.from_array(g, "g"), nh.from_array(bias, "b")], ms=True)
    check("ms_skip_simplified_ln", ort_run(m, {"x": x, "skip": skip}), [y, inv, s])
    save("ms_skip_simplified_ln", m, [({"x": x, "skip": skip}, [y, inv, s])])


# --- MatMulNBits -------------------------------------------------------------

def pack4(v):
    """uint values (last dim even) -> bytes, low nibble first."""
    v = v.astype(np.uint8)
    return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)


def gen_matmul_nbits():
    for name, k, n, bs, bits, zp, bias in [
        ("ms_matmul_nbits_4bit_zp", 64, 16, 32, 4, True, False),
        ("ms_matmul_nbits_4bit_kpad_bias", 40, 8, 16, 4, False, True),
        ("ms_matmul_nbits_4bit_odd_blocks_zp", 48, 8, 16, 4, True, False),
        ("ms_matmul_nbits_8bit_zp", 32, 8, 16, 8, True, False),
    ]:
        nb = (k + bs - 1) // bs
        q = RNG.integers(0, 1 << bits, (n, nb * bs))
        s = (RNG.random((n, nb)) * 0.05 + 0.01).astype(np.float32)
        z = RNG.integers(0, 1 << bits, (n, nb)) if zp else np.full((n, nb), 1 << (bits - 1))
        w = ((q.reshape(n, nb, bs) - z[:, :, None]) * s[:, :, None]).reshape(n, nb * bs)[:, :k]
        a = randn(3, k)
        b = randn(n, scale=0.1)
        y = (a.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0)).astype(np.float32)
        blob = pack4(q) if bits == 4 else q.astype(np.uint8)
        inits = [nh.from_array(blob.reshape(n, nb, bs * bits // 8), "B"),
                 nh.from_array(s.reshape(-1), "S")]
        ins = ["A", "B", "S"]
        if zp:
            zb = pack4(np.pad(z, ((0, 0), (0, nb % 2)))) if bits == 4 else z.astype(np.uint8)
            inits.append(nh.from_array(zb.reshape(-1), "Z"))
            ins.append("Z")
        if bias:
            ins += ["", "", "bias"] if not zp else ["", "bias"]
            inits.append(nh.from_array(b, "bias"))
        node = h.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=k, N=n,
                           bits=bits, block_size=bs)
        m = model([node], [vi("A", [3, k])], [vi("y", [3, n])], inits, ms=True)
        check(name, ort_run(m, {"A": a}), [y], 1e-4)
        save(name, m, [({"A": a}, [y])])


def gen_matmul_nbits_gidx():
    """g_idx (act-order GPTQ): column k uses the scale and zero point of block g_idx[k].
    onnxruntime's CPU kernel agrees without zero points; with packed uint8 zero points and g_idx it
    uses 8 for every zero point (measured with onnxruntime 1.32), so that case is checked against
    the schema's reference only."""
    rng = np.random.default_rng(13)
    for name, k, n, bs, zp in [("ms_matmul_nbits_4bit_gidx_zp", 64, 16, 16, True),
                               ("ms_matmul_nbits_4bit_gidx", 48, 8, 16, False)]:
        nb = (k + bs - 1) // bs
        g = rng.permutation(np.arange(k) // bs).astype(np.int32)
        q = rng.integers(0, 16, (n, nb * bs))
        s = (rng.random((n, nb)) * 0.05 + 0.01).astype(np.float32)
        z = rng.integers(0, 16, (n, nb)) if zp else np.full((n, nb), 8)
        w = (q[:, :k] - z[:, g]) * s[:, g]
        a = rng.standard_normal((3, k)).astype(np.float32)
        y = (a.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32)
        inits = [nh.from_array(pack4(q).reshape(n, nb, bs // 2), "B"), nh.from_array(s.reshape(-1), "S")]
        ins = ["A", "B", "S", "", "g_idx"]
        if zp:
            inits.append(nh.from_array(pack4(np.pad(z, ((0, 0), (0, nb % 2)))).reshape(-1), "Z"))
            ins[3] = "Z"
        inits.append(nh.from_array(g, "g_idx"))
        node = h.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=k, N=n, bits=4,
                           block_size=bs)
        m = model([node], [vi("A", [3, k])], [vi("y", [3, n])], inits, ms=True)
        if not zp:
            check(name, ort_run(m, {"A": a}), [y], 1e-4)
        save(name, m, [({"A": a}, [y])])


def gen_dq_matmul():
    """DequantizeLinear (blocked along K, opset 21) of an int4 / float4e2m1 / e4m3 initializer feeding MatMul."""
    import ml_dtypes
    rng = np.random.default_rng(21)
    k, n, bs = 64, 16, 32
    for name, qt, q in [
        ("dq_matmul_int4_blocked", TP.INT4, rng.integers(-8, 8, (k, n))),
        ("dq_matmul_e2m1_blocked", TP.FLOAT4E2M1,
         rng.choice([0, 0.5, 1, 1.5, 2, 3, 4, 6], (k, n)) * rng.choice([-1, 1], (k, n))),
        ("dq_matmul_e4m3_blocked", TP.FLOAT8E4M3FN,
         rng.standard_normal((k, n)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * 32),
    ]:
        s = (rng.random((k // bs, n)) * 0.05 + 0.01).astype(np.float32)
        w = q * np.repeat(s, bs, 0)
        a = randn(3, k)
        y = (a.astype(np.float64) @ w).astype(np.float32)
        wq = h.make_tensor("W", qt, [k, n], q.reshape(-1).tolist())
        nodes = [h.make_node("DequantizeLinear", ["W", "S"], ["Wf"], axis=0, block_size=bs),
                 h.make_node("MatMul", ["A", "Wf"], ["y"])]
        m = model(nodes, [vi("A", [3, k])], [vi("y", [3, n])], [wq, nh.from_array(s, "S")], opset=23)
        got = None
        if ort is not None:  # unoptimised: onnxruntime rewrites DQ -> MatMul into MatMulNBits, whose
            so = ort.SessionOptions()  # CPU kernel quantises A to int8 (an error of ~1e-2 here)
            so.log_severity_level = 3
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:  # onnxruntime 1.32 has no CPU DequantizeLinear for FLOAT4E2M1: numpy reference only
                got = ort.InferenceSession(m.SerializeToString(), so,
                                           providers=["CPUExecutionProvider"]).run(None, {"A": a})
            except Exception as e:  # noqa: BLE001
                print("%s: not checked against onnxruntime (%s)" % (name, str(e).splitlines()[0][:80]))
        check(name, got, [y], 1e-4)
        save(name, m, [({"A": a}, [y])])


# --- MoE, QMoE -------------------------------------------------------------

def moe_ref(x, logits, w1, w2, k, renorm, act, fusion=1, alpha=1.0, beta=0.0, limit=None,
            b1=None, b2=None, w3=None):
    """ORT MoE: softmax over all experts, top-k, optional renormalisation."""
    shape = x.shape
    x = x.reshape(-1, shape[-1]).astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.zeros_like(x)
    for t in range(len(x)):
        ids = np.argsort(-p[t], kind="stable")[:k]
        w = p[t, ids] / (p[t, ids].sum() if renorm else 1)
        for e, we in zip(ids, w):
            hdn = w1[e] @ x[t] + (0 if b1 is None else b1[e])
            if w3 is not None:
                g, u = hdn, w3[e] @ x[t]
            elif fusion == 1:
                g, u = hdn[0::2], hdn[1::2]
            else:
                g, u = np.split(hdn, 2)
            if act == "silu":
                a = g / (1 + np.exp(-g)) * u
            else:
                if limit is not None:
                    g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
                a = g / (1 + np.exp(-alpha * g)) * (u + beta)
            y[t] += we * (w2[e] @ a + (0 if b2 is None else b2[e]))
    return y.reshape(shape).astype(np.float32)


def gen_moe():
    E, H, I = 4, 8, 6
    x3, x2 = randn(2, 3, H), randn(5, H)
    l3, l2 = randn(6, E), randn(5, E)
    w1, w2, w3 = randn(E, 2 * I, H, scale=0.3), randn(E, H, I, scale=0.3), randn(E, I, H, scale=0.3)
    b1, b2 = randn(E, 2 * I, scale=0.1), randn(E, H, scale=0.1)
    oai = dict(activation_type="swiglu", activation_alpha=1.702, activation_beta=1.0, swiglu_limit=1.0)
    cases = [
        ("ms_moe_swiglu_interleaved_bias", x2, l2, dict(swiglu_fusion=1, k=2, **oai),
         ["w1", "b1", "w2", "b2"], dict(act="oai", fusion=1, alpha=1.702, beta=1.0, limit=1.0, b1=b1, b2=b2), True),
        ("ms_moe_swiglu_concat_renorm_3d", x3, l3, dict(swiglu_fusion=2, k=2, normalize_routing_weights=1, **oai),
         ["w1", "", "w2"], dict(act="oai", fusion=2, alpha=1.702, beta=1.0, limit=1.0), False),
        ("ms_moe_silu_fc3_renorm", x3, l3, dict(activation_type="silu", k=2, normalize_routing_weights=1),
         ["w1h", "", "w2", "", "w3"], dict(act="silu", w3=w3), False),
        ("ms_moe_swiglu_plain_top1", x2, l2, dict(activation_type="swiglu", swiglu_fusion=1, k=1),
         ["w1", "", "w2"], dict(act="oai", fusion=1, alpha=1.0, beta=0.0), True),
    ]
    for name, x, lg, attrs, wnames, ref, use_ort in cases:
        weights = {"w1": w1, "w1h": w1[:, :I], "w2": w2, "w3": w3, "b1": b1, "b2": b2}
        kw = dict(ref)
        act = kw.pop("act")
        w1_used = weights[wnames[0]]
        y = moe_ref(x, lg, w1_used, w2, attrs["k"], attrs.get("normalize_routing_weights", 0), act, **kw)
        inits = [nh.from_array(weights[w], w) for w in wnames if w]
        node = h.make_node("MoE", ["x", "logits"] + wnames, ["y"], domain="com.microsoft", **attrs)
        m = model([node], [vi("x", list(x.shape)), vi("logits", list(lg.shape))], [vi("y", list(x.shape))],
                  inits, ms=True)
        if use_ort:
            check(name, ort_run(m, {"x": x, "logits": lg}), [y])
        save(name, m, [({"x": x, "logits": lg}, [y])])


def sparse_mixer_ref(logits, eps=0.01):
    """onnxruntime's sparse_mixer_top2 (contrib_ops/cuda/moe): top-2 of the raw
    logits; choice j's weight is exp(l_j - m_j) / sum over the experts not
    chosen before with m_j - l <= 2 eps max(|l|, m_j), in float32."""
    lg = logits.astype(np.float32)
    ids = np.zeros((len(lg), 2), np.int64)
    w = np.zeros((len(lg), 2), np.float64)
    two_eps = np.float32(2) * np.float32(eps)
    for t, l in enumerate(lg):
        gone = np.zeros(len(l), bool)
        for j in range(2):
            e = int(np.argmax(np.where(gone, -np.inf, l)))  # first maximum: the lower id
            m = l[e]
            keep = ~gone & ~((m - l) > two_eps * np.maximum(np.abs(l), m))
            ids[t, j], w[t, j] = e, 1.0 / np.exp(l[keep].astype(np.float64) - m).sum()
            gone[e] = True
    return ids, w


def torch_sparsemixer(logits, eps=0.01):
    """transformers' PhiMoE sparsemixer (eval mode) on the same logits, when
    transformers is installed: the independent reference of the routing."""
    try:
        import torch
        from transformers.models.phimoe import modeling_phimoe as pm
    except ImportError:
        return None
    w, ids = pm.sparsemixer(torch.from_numpy(logits.astype(np.float32)), eps, False)
    return ids.numpy(), w.double().numpy()


def gen_moe_sparse_mixer():
    """com.microsoft MoE with use_sparse_mixer=1, as onnxruntime's transformers
    optimizer writes PhiMoE: silu experts with fc3, k=2.  onnxruntime's CPU
    MoE does not implement the sparse mixer (1.32: only its CUDA kernel does;
    the CPU kernel refuses fc3 and, without fc3, ignores use_sparse_mixer:
    the same output as softmax top-2, measured), so the reference is numpy
    from the CUDA kernel, its routing checked against transformers'
    sparsemixer.  Logits with near ties, so that the 2 eps window
    keeps several experts; every token's largest logit is above -1 (the CUDA
    kernel seeds its argmax with -1: docs/onnx.md)."""
    E, H, I, T = 8, 32, 16, 9  # sizes the tensor-core builder takes (--precision=tf32)
    x = randn(T, H)
    lg = randn(T, E, scale=2.0)
    for t in range(T):  # near ties within the window
        order = np.argsort(-lg[t], kind="stable")
        m = max(lg[t, order[0]], np.float32(0.5))
        lg[t, order[0]] = m
        lg[t, order[1]] = m * (1 - 0.015 * (t % 3))
        lg[t, order[2]] = lg[t, order[1]] * (1 - 0.012 * ((t + 1) % 2))
    lg = lg.astype(np.float32)
    w1, w2, w3 = randn(E, I, H, scale=0.3), randn(E, H, I, scale=0.3), randn(E, I, H, scale=0.3)
    ids, w = sparse_mixer_ref(lg)
    ref = torch_sparsemixer(lg)
    if ref is not None:
        tids, tw = ref
        if not (np.array_equal(tids, ids) and np.allclose(tw, w, rtol=1e-6)):
            raise SystemExit("ms_moe_sparse_mixer: the kernel's routing and transformers' sparsemixer differ")
    else:
        print("ms_moe_sparse_mixer: routing not checked against transformers (not installed)")
    assert (w < 0.999).sum() >= T // 2, "too few tokens whose window keeps another expert"
    xd = x.astype(np.float64)
    y = np.zeros_like(xd)
    for t in range(T):
        for e, we in zip(ids[t], w[t]):
            g, u = w1[e] @ xd[t], w3[e] @ xd[t]
            y[t] += we * (w2[e] @ (g / (1 + np.exp(-g)) * u))
    y = y.astype(np.float32)
    name = "ms_moe_sparse_mixer"
    node = h.make_node("MoE", ["x", "logits", "w1", "", "w2", "", "w3"], ["y"], domain="com.microsoft",
                       activation_type="silu", k=2, use_sparse_mixer=1)
    inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(w3, "w3")]
    m = model([node], [vi("x", [T, H]), vi("logits", [T, E])], [vi("y", [T, H])], inits, ms=True)
    if ort is not None:
        try:
            check(name, ort_run(m, {"x": x, "logits": lg}), [y])
            print("%s: checked against onnxruntime" % name)
        except SystemExit:
            raise
        except Exception as e:  # noqa: BLE001 -- the CPU EP's refusal
            print("%s: not checked against onnxruntime (%s)" % (name, str(e).splitlines()[0][:100]))
    save(name, m, [({"x": x, "logits": lg}, [y])])


def qmoe_weight(E, N, K, bits, bs):
    q = RNG.integers(0, 1 << bits, (E, N, K))
    nb = K // bs if bs else 1
    s = (RNG.random((E, N, nb)) * 0.02 + 0.005).astype(np.float32)
    w = ((q.reshape(E, N, nb, -1) - (1 << (bits - 1))) * s[..., None]).reshape(E, N, K)
    blob = pack4(q) if bits == 4 else q.astype(np.uint8)
    return blob, (s if bs else s[..., 0]), w.astype(np.float32)


def gen_qmoe():
    E, H, I = 4, 32, 32
    x, lg = randn(5, H), randn(5, E)
    for name, bits, bs in [("ms_qmoe_4bit", 4, 0), ("ms_qmoe_4bit_block16", 4, 16),
                           ("ms_qmoe_8bit", 8, 0)]:
        q1, s1, w1 = qmoe_weight(E, 2 * I, H, bits, bs)
        q2, s2, w2 = qmoe_weight(E, H, I, bits, bs)
        attrs = dict(activation_type="swiglu", swiglu_fusion=1, k=2, normalize_routing_weights=1,
                     expert_weight_bits=bits, activation_alpha=1.702, activation_beta=1.0,
                     swiglu_limit=7.0)
        if bs:
            attrs["block_size"] = bs
        y = moe_ref(x, lg, w1, w2, 2, 1, "oai", fusion=1, alpha=1.702, beta=1.0, limit=7.0)
        inits = [nh.from_array(a, n) for a, n in [(q1, "q1"), (s1, "s1"), (q2, "q2"), (s2, "s2")]]
        node = h.make_node("QMoE", ["x", "logits", "q1", "s1", "", "q2", "s2"], ["y"],
                           domain="com.microsoft", **attrs)
        m = model([node], [vi("x", [5, H]), vi("logits", [5, E])], [vi("y", [5, H])], inits, ms=True)
        check(name, ort_run(m, {"x": x, "logits": lg}), [y], 1e-4)
        save(name, m, [({"x": x, "logits": lg}, [y])])


# --- shapes known only at run time ------------------------------------------

def i64(name, v):
    return nh.from_array(np.asarray(v, np.int64), name)


def gen_dynamic_shapes():
    """NonZero makes a row count only known at run time: Squeeze, Unsqueeze,
    Flatten, Reshape(-1), ConstantOfShape(Shape), Range over a dim, Expand."""
    N = h.make_node
    nodes = [
        N("ReduceSum", ["x", "ax1"], ["rs"], keepdims=0),
        N("Greater", ["rs", "zero"], ["keep"]),
        N("NonZero", ["keep"], ["nz"]),
        N("Squeeze", ["nz", "ax0"], ["idx"]),
        N("Gather", ["x", "idx"], ["rows"], axis=0),
        N("Unsqueeze", ["rows", "ax1"], ["u"]),
        N("Flatten", ["u"], ["flat"], axis=2),
        N("Shape", ["flat"], ["fs"]),
        N("ConstantOfShape", ["fs"], ["ones"], value=nh.from_array(np.array([1.0], np.float32))),
        N("Add", ["flat", "ones"], ["a"]),
        N("Reshape", ["a", "shp"], ["r"]),
        N("Shape", ["rows"], ["rsh"]),
        N("Gather", ["rsh", "i0"], ["nrow"], axis=0),
        N("Range", ["s0", "nrow", "s1"], ["rg"]),
        N("Cast", ["rg"], ["rgf"], to=F),
        N("Unsqueeze", ["rgf", "ax12"], ["rgu"]),
        N("Add", ["r", "rgu"], ["r2"]),
        N("Concat", ["nrow1", "two", "two"], ["eshape"], axis=0),
        N("Unsqueeze", ["nrow", "ax0"], ["nrow1"]),
        N("Expand", ["r2", "eshape"], ["y"]),
    ]
    nodes = nodes[:17] + [nodes[18], nodes[17], nodes[19]]
    inits = [i64("ax0", [0]), i64("ax1", [1]), i64("ax12", [1, 2]), i64("shp", [-1, 2, 2]),
             i64("i0", 0), i64("s0", 0), i64("s1", 1), i64("two", [2]),
             nh.from_array(np.array(0, np.float32), "zero")]
    m = model(nodes, [vi("x", ["n", 4])], [vi("y", [None, 2, 2])], inits)
    sets = []
    for n in (6, 9):
        x = randn(n, 4)
        sets.append(({"x": x}, ort_run(m, {"x": x})))
    save("shape_dynamic_rows", m, sets)


def gen_dynamic_mixed():
    """A symbolic dim next to a run-time one: the shape is built from Shape
    at run time (Unsqueeze, Squeeze, Flatten of [batch, ?])."""
    N = h.make_node
    nodes = [
        N("ReduceSum", ["x", "ax0"], ["cs"], keepdims=0),
        N("Greater", ["cs", "zero"], ["keep"]),
        N("NonZero", ["keep"], ["nz"]),
        N("Squeeze", ["nz", "ax0"], ["idx"]),
        N("Gather", ["x", "idx"], ["cols"], axis=1),
        N("Unsqueeze", ["cols", "ax2"], ["u"]),
        N("Neg", ["u"], ["un"]),
        N("Squeeze", ["un", "ax2"], ["sq"]),
        N("Unsqueeze", ["sq", "ax1"], ["u2"]),
        N("Flatten", ["u2"], ["y"], axis=1),
    ]
    inits = [i64("ax0", [0]), i64("ax1", [1]), i64("ax2", [2]),
             nh.from_array(np.array(0, np.float32), "zero")]
    m = model(nodes, [vi("x", ["batch", 5])], [vi("y", ["batch", None])], inits)
    sets = []
    for b in (3, 4):
        x = randn(b, 5)
        sets.append(({"x": x}, ort_run(m, {"x": x})))
    save("shape_dynamic_mixed", m, sets)


def gen_symbolic_shapes():
    """Dims known up to symbols: everything folds to attributes."""
    N = h.make_node
    nodes = [
        N("Shape", ["x"], ["s"]),
        N("Slice", ["s", "st0", "en1"], ["b"]),
        N("Slice", ["s", "st1", "en2"], ["q"]),
        N("Mul", ["b", "q"], ["bq"]),
        N("Concat", ["bq", "m1"], ["shp"], axis=0),
        N("Reshape", ["x", "shp"], ["x2"]),
        N("Div", ["q", "two"], ["half"]),
        N("Slice", ["x", "st0", "half", "ax1"], ["xh"]),
        N("Shape", ["xh"], ["sh"]),
        N("ConstantOfShape", ["sh"], ["z"], value=nh.from_array(np.array([0.5], np.float32))),
        N("Add", ["xh", "z"], ["xz"]),
        N("Squeeze", ["q", "ax0"], ["qs"]),
        N("Range", ["zero", "qs", "one"], ["r"]),
        N("Cast", ["r"], ["rf"], to=F),
        N("Concat", ["q", "one1"], ["rshape"], axis=0),
        N("Reshape", ["rf", "rshape"], ["rcol"]),
        N("Expand", ["rcol", "sxx"], ["rex"]),
        N("Mul", ["x2", "scale"], ["y0"]),
        N("ReduceSum", ["rex", "ax0"], ["y1"], keepdims=0),
        N("Tile", ["xz", "reps"], ["y2"]),
    ]
    inits = [i64("st0", [0]), i64("en1", [1]), i64("st1", [1]), i64("en2", [2]), i64("m1", [-1]),
             i64("two", [2]), i64("ax1", [1]), i64("ax0", [0]), i64("zero", 0), i64("one", 1),
             i64("one1", [1]), i64("reps", [1, 1, 2]),
             nh.from_array(np.array([2.0], np.float32), "scale")]
    # sxx = Shape(x)[1:2] ++ [3]: an Expand target built from a dim
    nodes.insert(16, N("Concat", ["q", "three"], ["sxx"], axis=0))
    inits.append(i64("three", [3]))
    m = model(nodes, [vi("x", ["batch", "seq", 4])],
              [vi("y0", ["batch*seq", 4]), vi("y1", [3]), vi("y2", ["batch", None, 8])], inits)
    sets = []
    for b, s in ((2, 6), (3, 4)):
        x = randn(b, s, 4)
        sets.append(({"x": x}, ort_run(m, {"x": x})))
    save("shape_symbolic_fold", m, sets)


# --- external data, functions -------------------------------------------------

def gen_external():
    w, b = randn(8, 4), randn(4)
    nodes = [h.make_node("MatMul", ["x", "w"], ["t"]), h.make_node("Add", ["t", "b"], ["y"])]
    m = model(nodes, [vi("x", [3, 8])], [vi("y", [3, 4])], [nh.from_array(w, "w"), nh.from_array(b, "b")])
    x = randn(3, 8)
    y = (x @ w + b).astype(np.float32)
    save("external_data", m, [({"x": x}, [y])], external="weights.bin")


def gen_function():
    fn = h.make_function(
        "custom", "ScaledTanh", ["a"], ["o"],
        [h.make_node("Constant", [], ["c"], value=nh.from_array(np.array(0.5, np.float32))),
         h.make_node("Mul", ["a", "c"], ["m"]), h.make_node("Tanh", ["m"], ["o"])],
        [h.make_opsetid("", 18)])
    nodes = [h.make_node("ScaledTanh", ["x"], ["t"], domain="custom"),
             h.make_node("ScaledTanh", ["t"], ["y"], domain="custom")]
    m = model(nodes, [vi("x", [2, 5])], [vi("y", [2, 5])], functions=[fn])
    x = randn(2, 5)
    y = np.tanh(np.tanh(x * 0.5) * 0.5).astype(np.float32)
    check("local_function", ort_run(m, {"x": x}), [y])
    save("local_function", m, [({"x": x}, [y])])


def gen_function_attrs():
    """A function whose body reads the caller's attributes (ref_attr_name)."""
    body = h.make_node("LeakyRelu", ["a"], ["o"])
    body.attribute.append(h.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    perm = h.make_node("Transpose", ["o"], ["t"])
    perm.attribute.append(h.make_attribute_ref("perm", onnx.AttributeProto.INTS))
    fn = h.make_function("custom", "LeakyT", ["a"], ["t"], [body, perm], [h.make_opsetid("", 18)],
                         attributes=["alpha", "perm"])
    nodes = [h.make_node("LeakyT", ["x"], ["y"], domain="custom", alpha=0.25, perm=[1, 0])]
    m = model(nodes, [vi("x", [3, 4])], [vi("y", [4, 3])], functions=[fn])
    x = randn(3, 4)
    y = np.where(x > 0, x, 0.25 * x).T.astype(np.float32)
    check("local_function_attrs", ort_run(m, {"x": x}), [y])
    save("local_function_attrs", m, [({"x": x}, [y])])


# --- dynamic quantisation (onnxruntime's quantize_dynamic) -------------------

def dql_ref(x):
    """ONNX DynamicQuantizeLinear; scale 1 for an all-zero x, as onnxruntime computes it."""
    lo, hi = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
    s = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    z = np.uint8(np.clip(np.rint(np.float32(-lo / s)), 0, 255))
    return np.clip(np.rint((x / s).astype(np.float32)) + z, 0, 255).astype(np.uint8), s, z


def gen_dynamic_quant():
    """DynamicQuantizeLinear (an all-zero set too) and MatMulInteger with zero points per tensor, per row
    of A and per column of B (onnxruntime takes only a scalar a_zero_point: numpy reference for that one)."""
    rng = np.random.default_rng(34)
    x = (rng.standard_normal((4, 24)) * 2).astype(np.float32)
    m = model([h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [vi("x", [4, 24])],
              [vi("y", [4, 24], TP.UINT8), vi("s", [], F), vi("z", [], TP.UINT8)])
    sets = [({"x": v}, list(dql_ref(v))) for v in (x, np.zeros_like(x), np.abs(x))]
    for ins, outs in sets:
        check("dynamic_quantize_linear", ort_run(m, ins), outs, 0)
    save("dynamic_quantize_linear", m, sets)

    a = rng.integers(-128, 128, (2, 3, 24)).astype(np.int8)
    b = rng.integers(-128, 128, (24, 8)).astype(np.int8)
    za, zb = np.int8(-3), np.int8(5)
    y = np.matmul(a.astype(np.int32) - za, b.astype(np.int32) - zb).astype(np.int32)
    m = model([h.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])], [vi("a", [2, 3, 24], TP.INT8)],
              [vi("y", [2, 3, 8], TP.INT32)], [nh.from_array(b, "b"), nh.from_array(np.array(za), "za"),
                                               nh.from_array(np.array(zb), "zb")])
    check("matmul_integer_i8", ort_run(m, {"a": a}), [y], 0)
    save("matmul_integer_i8", m, [({"a": a}, [y])])

    a = rng.integers(0, 256, (4, 24)).astype(np.uint8)
    b = rng.integers(0, 256, (24, 8)).astype(np.uint8)
    za, zb = rng.integers(0, 256, 4).astype(np.uint8), rng.integers(0, 256, 8).astype(np.uint8)
    y = ((a.astype(np.int32) - za[:, None].astype(np.int32)) @ (b.astype(np.int32) - zb)).astype(np.int32)
    m = model([h.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
              [vi("a", [4, 24], TP.UINT8), vi("za", [4], TP.UINT8)], [vi("y", [4, 8], TP.INT32)],
              [nh.from_array(b, "b"), nh.from_array(zb, "zb")])
    save("matmul_integer_u8_rows_columns", m, [({"a": a, "za": za}, [y])])


# --- sequences of a known length (dynamo's optimize=False writes chunk/split as SplitToSequence) ------------

def gen_sequences():
    """SplitToSequence (whole pieces with keepdims=0, a scalar chunk length, computed lengths), SequenceAt with
    negative positions, SequenceLength, SequenceConstruct, SequenceInsert and ConcatFromSequence (new_axis too).
    seq_split_counts' shapes depend on data: the interpreter's case (JetMoE's fixture compiles that form)."""
    rng = np.random.default_rng(341)
    I64 = TP.INT64
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    nodes = [h.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0),
             h.make_node("SequenceAt", ["s", "m1"], ["last"]),
             h.make_node("SequenceAt", ["s", "z"], ["first"]),
             h.make_node("SequenceLength", ["s"], ["n"]),
             h.make_node("Cast", ["n"], ["nf"], to=F),
             h.make_node("Mul", ["first", "nf"], ["first_n"])]
    m = model(nodes, [vi("x", [3, 4, 5])], [vi("last", [3, 5]), vi("first_n", [3, 5])],
              [nh.from_array(np.array(-1, np.int64), "m1"), nh.from_array(np.array(0, np.int64), "z")])
    want = [x[:, 3], x[:, 0] * 4]
    check("seq_split_unbind", ort_run(m, {"x": x}), want, 0)
    save("seq_split_unbind", m, [({"x": x}, want)])

    x = rng.standard_normal((2, 5)).astype(np.float32)
    t = rng.standard_normal((2, 3)).astype(np.float32)
    nodes = [h.make_node("SplitToSequence", ["x", "two"], ["s"], axis=-1),
             h.make_node("SequenceAt", ["s", "m1"], ["tail"]),
             h.make_node("SequenceInsert", ["s", "t", "z"], ["s2"]),
             h.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=-1),
             h.make_node("SequenceAt", ["s", "z"], ["head"]),
             h.make_node("SequenceConstruct", ["head", "tail2"], ["p"]),
             h.make_node("SequenceAt", ["s", "one"], ["tail2"]),
             h.make_node("ConcatFromSequence", ["p"], ["stack"], axis=-1, new_axis=1)]
    nodes = nodes[:5] + [nodes[6], nodes[5], nodes[7]]
    m = model(nodes, [vi("x", [2, 5]), vi("t", [2, 3])],
              [vi("tail", [2, 1]), vi("cat", [2, 8]), vi("stack", [2, 2, 2])],
              [nh.from_array(np.array(2, np.int64), "two"), nh.from_array(np.array(-1, np.int64), "m1"),
               nh.from_array(np.array(0, np.int64), "z"), nh.from_array(np.array(1, np.int64), "one")])
    want = [x[:, 4:], np.concatenate([t, x], -1), np.stack([x[:, 0:2], x[:, 2:4]], -1)]
    check("seq_chunks_insert_concat", ort_run(m, {"x": x, "t": t}), want, 0)
    save("seq_chunks_insert_concat", m, [({"x": x, "t": t}, want)])

    x = rng.standard_normal((6, 3)).astype(np.float32)
    c = np.array([1, 0, 3, 2], np.int64)
    nodes = [h.make_node("SplitToSequence", ["x", "c"], ["s"], axis=0),
             h.make_node("SequenceAt", ["s", "two"], ["third"]),
             h.make_node("SequenceConstruct", ["third", "third"], ["p"]),
             h.make_node("ConcatFromSequence", ["p"], ["cat"], axis=0)]
    m = model(nodes, [vi("x", [6, 3]), vi("c", [4], I64)], [vi("cat", [6, 3])],
              [nh.from_array(np.array(2, np.int64), "two")])
    want = [np.concatenate([x[1:4], x[1:4]])]
    check("seq_split_counts", ort_run(m, {"x": x, "c": c}), want, 0)
    save("seq_split_counts", m, [({"x": x, "c": c}, want)])


# --- the QOperator format (onnxruntime's quantize_static, quant_format=QOperator) -------------------------

def gen_qoperator():
    """The com.microsoft QLinear ops the quantizer writes, in the settings its fixtures (gen_qop.py) do not
    reach: QGemm with transB, B's scale and zero point one per column, an int32 bias and alpha, with a float
    output and with a uint8 one; QLinearConcat, QLinearWhere, QLinearLeakyRelu, QLinearSoftmax along a
    middle axis.  References: onnxruntime's CPU kernels (the forms moec imports, bit for bit)."""
    rng = np.random.default_rng(35)
    U8, I8, ms = TP.UINT8, TP.INT8, "com.microsoft"

    def c(name, v):
        return nh.from_array(np.asarray(v), name)

    a = rng.integers(0, 256, (5, 24)).astype(np.uint8)
    b = rng.integers(-128, 128, (8, 24)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 8).astype(np.int32)
    inits = [c("sa", np.float32(0.02)), c("za", np.uint8(131)), c("b", b),
             c("sb", (rng.random(8) * 0.01 + 0.002).astype(np.float32)),
             c("zb", rng.integers(-4, 5, 8).astype(np.int8)), c("bias", bias)]
    m = model([h.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb", "bias"], ["y"], domain=ms, alpha=0.5,
                           transB=1)], [vi("a", [5, 24], U8)], [vi("y", [5, 8])], inits, ms=True)
    y = ort_run(m, {"a": a})
    if y is not None:
        save("qgemm_transb_per_column_f32", m, [({"a": a}, y)])
    m = model([h.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb", "bias", "sy", "zy"], ["y"], domain=ms,
                           transB=1)], [vi("a", [5, 24], U8)], [vi("y", [5, 8], U8)],
              inits + [c("sy", np.float32(0.05)), c("zy", np.uint8(120))], ms=True)
    y = ort_run(m, {"a": a})
    if y is not None:
        save("qgemm_transb_per_column_u8", m, [({"a": a}, y)])

    x0 = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    x1 = rng.integers(-128, 128, (2, 5, 4)).astype(np.int8)
    m = model([h.make_node("QLinearConcat", ["sy", "zy", "x0", "s0", "z0", "x1", "s1", "z1"], ["y"], domain=ms,
                           axis=1)], [vi("x0", [2, 3, 4], I8), vi("x1", [2, 5, 4], I8)], [vi("y", [2, 8, 4], I8)],
              [c("sy", np.float32(0.03)), c("zy", np.int8(-5)), c("s0", np.float32(0.02)), c("z0", np.int8(3)),
               c("s1", np.float32(0.045)), c("z1", np.int8(-7))], ms=True)
    y = ort_run(m, {"x0": x0, "x1": x1})
    if y is not None:
        save("qlinear_concat", m, [({"x0": x0, "x1": x1}, y)])

    cond = rng.random((3, 6)) < 0.5
    x, w = rng.integers(0, 256, (3, 6)).astype(np.uint8), rng.integers(0, 256, (1, 6)).astype(np.uint8)
    m = model([h.make_node("QLinearWhere", ["c", "x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], domain=ms)],
              [vi("c", [3, 6], TP.BOOL), vi("x", [3, 6], U8), vi("w", [1, 6], U8)], [vi("y", [3, 6], U8)],
              [c("sx", np.float32(0.02)), c("zx", np.uint8(128)), c("sw", np.float32(0.07)), c("zw", np.uint8(100)),
               c("sy", np.float32(0.04)), c("zy", np.uint8(110))], ms=True)
    y = ort_run(m, {"c": cond, "x": x, "w": w})
    if y is not None:
        save("qlinear_where", m, [({"c": cond, "x": x, "w": w}, y)])

    x = rng.integers(0, 256, (4, 16)).astype(np.uint8)
    m = model([h.make_node("QLinearLeakyRelu", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=ms, alpha=0.1)],
              [vi("x", [4, 16], U8)], [vi("y", [4, 16], U8)],
              [c("sx", np.float32(0.05)), c("zx", np.uint8(128)), c("sy", np.float32(0.03)), c("zy", np.uint8(20))],
              ms=True)
    y = ort_run(m, {"x": x})
    if y is not None:
        save("qlinear_leaky_relu", m, [({"x": x}, y)])

    x = rng.integers(-128, 128, (2, 8, 3)).astype(np.int8)
    m = model([h.make_node("QLinearSoftmax", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=ms, axis=1, opset=13)],
              [vi("x", [2, 8, 3], I8)], [vi("y", [2, 8, 3], I8)],
              [c("sx", np.float32(0.05)), c("zx", np.int8(0)), c("sy", np.float32(1 / 256)), c("zy", np.int8(-128))],
              ms=True)
    y = ort_run(m, {"x": x})
    if y is not None:
        save("qlinear_softmax_axis1", m, [({"x": x}, y)])


# --- Mod ----------------------------------------------------------------------------------------------------

def gen_mod():
    """Mod: fmod=0 (the floor remainder, the divisor's sign) on int64 and int32 with every sign combination and
    broadcasting, and on float32 (Mod-28; an infinite divisor too), fmod=1 (C's remainder, the dividend's sign)
    on int32 and float32 (values whose quotient is far from an integer: moec's float form rounds the quotient
    once).  References: numpy's mod and fmod, checked against onnxruntime where it takes the case."""
    rng = np.random.default_rng(351)
    for name, dt, tp, fm in (("mod_i64", np.int64, TP.INT64, 0), ("mod_i32", np.int32, TP.INT32, 0),
                             ("mod_fmod_i32", np.int32, TP.INT32, 1)):
        a = rng.integers(-50, 50, (4, 6)).astype(dt)
        b = np.array([7, -7, 3, -3, 1, 50], dt)
        y = (np.fmod(a, b) if fm else np.mod(a, b)).astype(dt)
        m = model([h.make_node("Mod", ["a", "b"], ["y"], fmod=fm)], [vi("a", [4, 6], tp), vi("b", [6], tp)],
                  [vi("y", [4, 6], tp)])
        check(name, ort_run(m, {"a": a, "b": b}), [y], 0)
        save(name, m, [({"a": a, "b": b}, [y])])
    b = np.array([1.5, -2.25, 0.75, 4.0], np.float32)
    q = rng.integers(-9, 10, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4))
    a = (q * b).astype(np.float32)
    y = np.fmod(a, b).astype(np.float32)
    m = model([h.make_node("Mod", ["a", "b"], ["y"], fmod=1)], [vi("a", [3, 4]), vi("b", [4])], [vi("y", [3, 4])])
    check("mod_fmod_f32", ort_run(m, {"a": a, "b": b}), [y])
    save("mod_fmod_f32", m, [({"a": a, "b": b}, [y])])
    # fmod=0 on floats (Mod-28's floor remainder, numpy's mod), an infinite divisor in the last column
    b = np.array([1.5, -2.25, 0.75, np.inf], np.float32)
    a = (q * np.array([1.5, -2.25, 0.75, 1.0])).astype(np.float32)
    y = np.mod(a, b).astype(np.float32)
    m = model([h.make_node("Mod", ["a", "b"], ["y"], fmod=0)], [vi("a", [3, 4]), vi("b", [4])], [vi("y", [3, 4])])
    save("mod_floor_f32", m, [({"a": a, "b": b}, [y])])


# --- RMSNormalization with one 16-bit type ------------------------------------------------------------------

def gen_rms_norm_16():
    """RMSNormalization-23 with X, scale and Y float16 (dynamo's export of a DeepSeek/GLM/Mixtral norm in half):
    the definition computes Normalized in the float32 stash type, casts it to X's type, then multiplies by the
    scale in float16 -- two roundings, as PyTorch's LlamaRMSNorm (weight * x.to(input_dtype)).  Values where
    one rounding and two differ.  Reference: numpy from the schema's function body."""
    rng = np.random.default_rng(352)
    x = (rng.standard_normal((6, 64)) * 3).astype(np.float16)
    w = (1 + rng.uniform(-0.4, 0.4, 64)).astype(np.float16)
    xf = x.astype(np.float32)
    nrm = (xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + np.float32(1e-6))).astype(np.float16)
    y = (nrm.astype(np.float32) * w.astype(np.float32)).astype(np.float16)
    once = (xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + np.float32(1e-6)) * w).astype(np.float16)
    assert (once != y).sum() > 10
    m = model([h.make_node("RMSNormalization", ["x", "w"], ["y"], epsilon=1e-6)],
              [vi("x", [6, 64], TP.FLOAT16)], [vi("y", [6, 64], TP.FLOAT16)], [nh.from_array(w, "w")], opset=23)
    m.ir_version = 11
    save("rms_norm_f16_two_roundings", m, [({"x": x}, [y])])


# --- uint16 activations (quantize_static's A16W8) -----------------------------------------------------------

def gen_a16w8():
    """QDQ with uint16 activations and int8 weights per column (quantize_static(activation_type=QUInt16), the
    A16W8 recipe): Q/DQ of x to uint16 (zero point 32768), the weight's DequantizeLinear, MatMul, Q/DQ of the
    result.  Reference: onnxruntime (the same numbers as numpy's definition)."""
    rng = np.random.default_rng(353)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    wq = rng.integers(-127, 128, (32, 16)).astype(np.int8)
    ws = (rng.random(16) * 0.01 + 0.002).astype(np.float32)
    inits = [nh.from_array(np.float32(1 / 8000), "xs"), nh.from_array(np.uint16(32768), "xz"),
             nh.from_array(wq, "wq"), nh.from_array(ws, "ws"), nh.from_array(np.zeros(16, np.int8), "wz"),
             nh.from_array(np.float32(1 / 4000), "ys"), nh.from_array(np.uint16(30000), "yz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
             h.make_node("MatMul", ["xd", "wd"], ["m"]),
             h.make_node("QuantizeLinear", ["m", "ys", "yz"], ["mq"]),
             h.make_node("DequantizeLinear", ["mq", "ys", "yz"], ["y"])]
    m = model(nodes, [vi("x", [4, 32])], [vi("y", [4, 16])], inits, opset=21)
    m.ir_version = 10
    xd = (np.clip(np.rint(x * np.float32(8000)) + 32768, 0, 65535) - 32768).astype(np.float32) / np.float32(8000)
    mm = xd @ (wq.astype(np.float32) * ws)
    y = ((np.clip(np.rint(mm * np.float32(4000)) + 30000, 0, 65535) - 30000) / np.float32(4000)).astype(np.float32)
    got = None
    if ort is not None:  # graph optimisations off: on, onnxruntime fuses the QDQ MatMul into an integer one
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        got = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    check("qdq_a16w8_u16", got, [y], 1e-3)
    save("qdq_a16w8_u16", m, [({"x": x}, got if got is not None else [y])])

    # QInt4 weights per column (quantize_static(weight_type=QInt4, per_channel=True) below opset 21): the
    # quantizer writes com.microsoft's DequantizeLinear, and the int4 zero point (16 elements) is small
    # enough to have been a const node, which no kernel can hold packed (now a weight)
    w4 = rng.integers(-8, 8, (32, 16)).astype(np.int8)
    z4 = rng.integers(-2, 3, 16).astype(np.int8)
    w4t = h.make_tensor("w4", TP.INT4, [32, 16], w4.flatten().tolist())
    z4t = h.make_tensor("z4", TP.INT4, [16], z4.tolist())
    nodes = [h.make_node("DequantizeLinear", ["w4", "ws", "z4"], ["wd"], axis=1, domain="com.microsoft"),
             h.make_node("MatMul", ["x", "wd"], ["y"])]
    m = model(nodes, [vi("x", [4, 32])], [vi("y", [4, 16])], [w4t, nh.from_array(ws, "ws"), z4t], ms=True)
    y = (x @ ((w4.astype(np.float32) - z4) * ws)).astype(np.float32)
    got = None
    if ort is not None:
        got = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    check("ms_dequantize_int4_per_column", got, [y], 1e-5)
    save("ms_dequantize_int4_per_column", m, [({"x": x}, [y])])


# --- opsets 11 and 12 (torch.onnx.export(opset_version=11)) ---------------------------------------------------

def gen_opset11():
    """What opset 13 changed, at opset 11: Softmax and LogSoftmax over x coerced to 2-D at axis (default 1: a
    [2,3,4] tensor normalised over its last 12 values together), Split's sizes, Squeeze's and Unsqueeze's axes,
    ReduceSum's axes as attributes; Clip-11 (min and max inputs, as 13).  References: numpy, checked against
    onnxruntime."""
    rng = np.random.default_rng(354)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    e = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(1, keepdims=True))
    sm = (e / e.sum(1, keepdims=True)).reshape(2, 3, 4)
    nodes = [h.make_node("Softmax", ["x"], ["sm"]),
             h.make_node("LogSoftmax", ["x"], ["lsm"], axis=-1),
             h.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 3]),
             h.make_node("Squeeze", ["a"], ["sq"], axes=[2]),
             h.make_node("Unsqueeze", ["sq"], ["un"], axes=[0, 3]),
             h.make_node("ReduceSum", ["b"], ["rs"], axes=[-1, 0], keepdims=0),
             h.make_node("Clip", ["x", "lo", "hi"], ["cl"])]
    outs = [sm.astype(np.float32),
            (x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))),
            x[:, :, :1].reshape(1, 2, 3, 1), x[:, :, 1:].sum(axis=(2, 0)), np.clip(x, -0.5, 0.7)]
    m = model(nodes, [vi("x", [2, 3, 4])], [vi("sm", [2, 3, 4]), vi("lsm", [2, 3, 4]), vi("un", [1, 2, 3, 1]),
                                            vi("rs", [3]), vi("cl", [2, 3, 4])], opset=11,
              inits=[nh.from_array(np.float32(-0.5), "lo"), nh.from_array(np.float32(0.7), "hi")])
    m.ir_version = 7
    outs = [o.astype(np.float32) for o in outs]
    check("opset11_changed_ops", ort_run(m, {"x": x}), outs)
    save("opset11_changed_ops", m, [({"x": x}, outs)])


def main():
    os.makedirs(OUT, exist_ok=True)
    gen_einsum()
    gen_norms()
    gen_matmul_nbits()
    gen_moe()
    gen_qmoe()
    gen_dynamic_shapes()
    gen_dynamic_mixed()
    gen_symbolic_shapes()
    gen_external()
    gen_function()
    gen_function_attrs()
    gen_matmul_nbits_gidx()
    gen_dq_matmul()
    gen_moe_sparse_mixer()  # last of RNG's users: the cases before it keep their random draws
    gen_dynamic_quant()  # its own generator
    gen_sequences()  # its own generator
    gen_qoperator()  # its own generator
    gen_mod()  # its own generator
    gen_rms_norm_16()  # its own generator
    gen_a16w8()  # its own generator
    gen_opset11()  # its own generator


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Regression cases for graphs the interpreter runs but `moec compile` once
refused (tests/codegen-data/regress_*/, tests/CMakeLists.txt: regress_*).
Each case is a model.ir (written below) and one test set: seeded inputs
(floats N(0,1), integers in [0, 4)) for T = 5, and the interpreter's outputs
on the graph as written (`moec run --test-data`), so `moec test --emulate`
checks the generated kernels against the graph and `moec test --compiled
--check-eval` every pass.  No torch or onnx needed: the inputs are written
as TensorProto by hand.

usage: python3 tests/codegen-data/gen_regress.py MOEC [OUTDIR]
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

CASES = {
    # rms_norm over cast(bf16 -> f32) with an f32 gamma before an f32 matmul
    # (canon makes it rms_norm to=f32 over the bf16 rows): fuse-norm folded
    # it into a matmul of bf16 x by an f32 weight ("operands have different
    # types bf16 and f32").  x is widened to f32 (exact) before the fold.
    "regress_rms_cast_f32_matmul": """\
# rms_norm over cast(bf16 -> f32), f32 gamma, f32 matmul (gen_regress.py)
weight $g : f32[16] mean=1.0 scale=0.2
weight $w : f32[24,16]

graph @rms_cast(%x: bf16[T,16]) -> (h: f32[T,24]) {
	%c = cast %x, to=f32 : f32[T,16]
	%n = rms_norm %c, $g, eps=1e-06 : f32[T,16]
	%h = matmul %n, $w, trans_b=1 : f32[T,24]
	ret %h
}
""",
    # the same through a MoE block's row gather (fuse-norm's grouped path):
    # a bf16 block with the norm in f32 and f32 experts
    "regress_rms_cast_f32_moe": """\
# a MoE block whose norm reads cast(bf16 -> f32) rows, f32 experts (gen_regress.py)
weight $g : f32[16] mean=1.0 scale=0.2
weight $router : f32[4,16]
weight $wgu : f32[4,64,16]
weight $wdown : f32[4,16,32]

graph @moe_cast(%x: bf16[T,16]) -> (y: f32[T,16]) {
	%c = cast %x, to=f32 : f32[T,16]
	%n = rms_norm %c, $g, eps=1e-06 : f32[T,16]
	%logits = matmul %n, $router, trans_b=1 : f32[T,4]
	%y = moe %n, %logits, _, $wgu, $wdown, k=2, renorm=1, router=softmax : f32[T,16]
	ret %y
}
""",
    # a route whose weights nothing reads (only the expert ids are used):
    # the route kernel's call had one result where its builder binds two
    # ("no value for its parameter 'ids'")
    "regress_route_ids_only": """\
# a route whose weights are unused: the ids pick rows of a table (gen_regress.py)
weight $router : f32[4,16]
weight $e : f32[4,16]

graph @ids_only(%x: f32[T,16]) -> (y: f32[T,2,16]) {
	%logits = matmul %x, $router, trans_b=1 : f32[T,4]
	%w, %ids = route %logits, k=2, renorm=1, router=softmax : f32[T,2], i32[T,2]
	%y = gather $e, %ids, axis=0 : f32[T,2,16]
	ret %y
}
""",
    # torch's div(rounding_mode="trunc") as the dynamo exporter writes it (granitemoe 4.57: a routed
    # row's token, row // k): Floor and Sign had no IR op, the importer refused the graph
    "regress_trunc_div": """\
# sign(q) * floor(|q|) of q = x / 3: trunc division in floats (gen_regress.py)
graph @trunc_div(%x: f32[T,16]) -> (y: f32[T,16]) {
	%k = const value=[0.375] : f32[]
	%q = div %x, %k : f32[T,16]
	%a = abs %q : f32[T,16]
	%f = floor %a : f32[T,16]
	%s = sign %q : f32[T,16]
	%y = mul %f, %s : f32[T,16]
	ret %y
}
""",
}

T = 5
ONNX = {"f32": (1, "<f4"), "f16": (10, "<f2"), "bf16": (16, None), "i32": (6, "<i4"), "i64": (7, "<i8")}


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def tensor_proto(name, dt, a):
    code, np_t = ONNX[dt]
    if dt == "bf16":
        u = a.astype(np.float32).view(np.uint32)
        raw = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    else:
        raw = a.astype(np_t).tobytes()
    msg = b"".join(b"\x08" + varint(d) for d in a.shape)
    msg += b"\x10" + varint(code)
    nb = name.encode()
    msg += b"\x42" + varint(len(nb)) + nb
    msg += b"\x4a" + varint(len(raw)) + raw
    return msg


def params(ir):
    sig = re.search(r"graph @\w+\((.*?)\) ->", ir).group(1)
    for p in re.finditer(r"%(\w+): (\w+)\[([^\]]*)\]", sig):
        dims = [T if d.strip() == "T" else int(d) for d in p.group(3).split(",") if d.strip()]
        yield p.group(1), p.group(2), dims


def main():
    moec = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(20261202)
    for name, ir in CASES.items():
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "in"))
        with open(os.path.join(d, "model.ir"), "w") as f:
            f.write(ir)
        for i, (p, dt, dims) in enumerate(params(ir)):
            a = rng.integers(0, 4, dims) if dt.startswith("i") else rng.standard_normal(dims)
            with open(os.path.join(d, "in", "input_%d.pb" % i), "wb") as f:
                f.write(tensor_proto(p, dt, a))
        subprocess.run([moec, "run", "-q", os.path.join(d, "model.ir"), "--test-data", os.path.join(d, "in"),
                        "-o", os.path.join(d, "test_data_set_0")], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(os.path.join(d, "in"))
        for f in os.listdir(os.path.join(d, "test_data_set_0")):
            if f.startswith("routing_"):
                os.remove(os.path.join(d, "test_data_set_0", f))
        print("wrote", name)


main()

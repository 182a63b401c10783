#!/usr/bin/env python3
"""Write the onnx wheel's backend node tests to a folder, in the backend-test
layout (model.onnx, test_data_set_N/input_N.pb, output_N.pb).

The wheel (onnx >= 1.16) no longer ships the generated node data, only the
case definitions; this regenerates it.  Cases whose graph inputs or outputs
are not tensors (sequences, optionals, maps) are left out; the runner
decides which of the rest apply.

Cases declared outside moec's opsets are also written re-targeted to the
nearest one, as NAME_opset13 (from opsets below 13) or NAME_opset23 (from
24..28, mostly version bumps that add dtypes such as int2 or float4), when
the ONNX checker accepts the model there and onnx's reference implementation
computes the same outputs: then that opset means the same thing for the
case (Softmax before 13, say, does not).  Exit 77 (skip) if onnx is missing.

usage: gen_node_tests.py OUTDIR [NAME_SUBSTRING...]
"""
import copy
import os
import sys
import warnings

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case import node as node_cases
except ImportError:
    print("onnx is not installed: pip install onnx", file=sys.stderr)
    sys.exit(77)


def opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def to_np(x):
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def same_outputs(got, want):
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        a, b = np.asarray(to_np(a)), np.asarray(to_np(b))
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind == "f":
            if not np.allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True


def retarget(case, version):
    """A copy of case declared at opset version, or None if that means otherwise."""
    from onnx.reference import ReferenceEvaluator

    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = version
    m.ir_version = min(max(m.ir_version, 7), 11)
    try:
        onnx.checker.check_model(m, full_check=True)
        ref = ReferenceEvaluator(m)
        names = [i.name for i in m.graph.input]
        for inputs, outputs in case.data_sets:
            got = ref.run(None, dict(zip(names, [to_np(x) for x in inputs])))
            if not same_outputs(got, outputs):
                return None
    except Exception:
        return None
    c = copy.copy(case)
    c.model = m
    c.name = "%s_opset%d" % (case.name, version)
    return c


def tensor_of(value, name):
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), name)


def write_case(root, case):
    d = os.path.join(root, case.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    g = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        s = os.path.join(d, "test_data_set_%d" % i)
        os.makedirs(s, exist_ok=True)
        for j, x in enumerate(inputs):
            with open(os.path.join(s, "input_%d.pb" % j), "wb") as f:
                f.write(tensor_of(x, g.input[j].name).SerializeToString())
        for j, y in enumerate(outputs):
            with open(os.path.join(s, "output_%d.pb" % j), "wb") as f:
                f.write(tensor_of(y, g.output[j].name).SerializeToString())


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, only = sys.argv[1], sys.argv[2:]
    os.makedirs(root, exist_ok=True)
    warnings.simplefilter("ignore")
    n = 0
    for case in node_cases.collect_testcases(None):
        if only and not any(s in case.name for s in only):
            continue
        g = case.model.graph
        if any(not vi.type.HasField("tensor_type") for vi in list(g.input) + list(g.output)):
            continue
        cases = [case]
        v = opset(case.model)
        if v > 23 or 0 < v < 13:
            retargeted = retarget(case, 23 if v > 23 else 13)
            if retargeted:
                cases.append(retargeted)
        for c in cases:
            try:
                write_case(root, c)
                n += 1
            except Exception as e:  # a case numpy cannot serialise (strings, ...)
                print("skipped %s: %s" % (c.name, e), file=sys.stderr)
    print("wrote %d node tests (onnx %s) to %s" % (n, onnx.__version__, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())

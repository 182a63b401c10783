#!/usr/bin/env python3
"""The argsort case's data sets (tests/codegen-data/argsort): floats with ties, NaNs, infinities and signed zeros,
the references numpy's stable sorts in topk's order (docs/ir.md: the value, NaN largest, then the lower index).
Run: python3 tests/codegen-data/argsort/gen.py (numpy, onnx).  Deterministic."""
import os

import numpy as np
from onnx import numpy_helper

D = os.path.dirname(os.path.abspath(__file__))


def order(x, largest):
    nan = np.isnan(x)
    v = np.where(nan, 0, x)
    keys = (np.arange(len(x)), -v, ~nan) if largest else (np.arange(len(x)), v, nan)
    return np.lexsort(keys).astype(np.int64)


def main():
    rng = np.random.default_rng(32)
    sets = [np.array([1, np.nan, -0.0, 3, np.inf, 0.0, np.nan, 1, -np.inf, 3], np.float32),
            rng.integers(-3, 4, 1500).astype(np.float32)]
    sets[1][rng.integers(0, 1500, 40)] = np.nan
    for s, x in enumerate(sets):
        d = os.path.join(D, f"test_data_set_{s}")
        os.makedirs(d, exist_ok=True)
        hi, lo = order(x, 1), order(x, 0)
        for fn, nm, a in (("input_0", "x", x), ("output_0", "i", hi), ("output_1", "v", x[hi]),
                          ("output_2", "j", lo)):
            with open(os.path.join(d, fn + ".pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, nm).SerializeToString())


if __name__ == "__main__":
    main()

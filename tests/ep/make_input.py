#!/usr/bin/env python3
"""A bf16 input x[T,H] as an ONNX TensorProto (.pb), seeded; with --skew the
rows are scaled so that routing piles onto a few experts (see ep.sh).
usage: make_input.py OUT.pb T H SEED [--skew]"""
import struct, sys
import numpy as np

def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out

def tensor_proto(name, arr_bf16_bits, dims):
    msg = b"".join(b"\x08" + varint(d) for d in dims)          # dims = 1
    msg += b"\x10" + varint(16)                                 # data_type = BFLOAT16
    nb = name.encode()
    msg += b"\x42" + varint(len(nb)) + nb                       # name = 8
    raw = arr_bf16_bits.astype("<u2").tobytes()
    msg += b"\x4a" + varint(len(raw)) + raw                     # raw_data = 9
    return msg

def main():
    out, T, H, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, H)).astype(np.float32)
    if "--skew" in sys.argv:
        # one shared direction dominates every row: the router sends most
        # tokens to the same few experts (a hot-expert load)
        d = rng.standard_normal(H).astype(np.float32)
        x = 0.2 * x + 3.0 * d
    bits = (x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16
    open(out, "wb").write(tensor_proto("x", bits.astype(np.uint16), (T, H)))

main()

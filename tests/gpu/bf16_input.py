#!/usr/bin/env python3
"""bf16_input.py DIR T H SEED: DIR/input_0.pb, the TensorProto x: bf16 [T,H] of
N(0,1) values drawn with random.seed(SEED) (round to nearest even), for the GPU
scripts that make their own test sets (routing_flip.sh, bench/quant/run_quant.sh)."""
import os, random, struct, sys

d, T, H, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
random.seed(seed)


def varint(n):
    b = b""
    while True:
        c, n = n & 0x7F, n >> 7
        b += bytes([c | (0x80 if n else 0)])
        if not n:
            return b


def bf16(v):
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    return struct.pack("<H", (u + 0x7FFF + ((u >> 16) & 1)) >> 16)


raw = b"".join(bf16(random.gauss(0, 1)) for _ in range(T * H))
pb = (b"\x08" + varint(T) + b"\x08" + varint(H) + b"\x10" + varint(16) + b"\x42\x01x" +
      b"\x4a" + varint(len(raw)) + raw)
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "input_0.pb"), "wb").write(pb)

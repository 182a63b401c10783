#!/bin/sh
# manifest_consistency.sh SRCDIR BUILDDIR — `moert verify` on bundles whose
# checksums are all valid but whose manifest contradicts itself (issue 18):
# a compiled bundle's manifest is edited, then every CRC is recomputed, as
# tests/fuzz/fuzz_bundle.c does for its mutants.  Each edit must be refused
# (exit 1, a check failed) with its own message; the unedited bundle passes.
src=$1 build=$2
moec=$build/tools/moec moert=$build/tools/moert
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# bf16 x [T,64] @ w [64,64] at max_tokens 4096: two launch variants of the
# GEMM (tokens=1..64 and 65..4096) and a weight of 8192 bytes.
printf 'weight $w : bf16[64,64]\ngraph @g(%%x: bf16[T,64]) -> (y: bf16[T,64]) {\n\t%%y = matmul %%x, $w : bf16[T,64]\n\tret %%y\n}\n' \
	>"$tmp/g.ir"
"$moec" compile "$tmp/g.ir" --arch=sm_90a --max-tokens=4096 -o "$tmp/g.moeb" 2>"$tmp/err" ||
	{ cat "$tmp/err"; exit 1; }

python3 - "$tmp" "$moert" <<'PY'
import struct, subprocess, sys

tmp, moert = sys.argv[1], sys.argv[2]

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF

orig = open(tmp + "/g.moeb", "rb").read()
n = struct.unpack_from("<I", orig, 12)[0]
sec = {}
for i in range(n):
    e = 64 + 64 * i
    name = orig[e:e + 32].rstrip(b"\0").decode()
    off, size, crc = struct.unpack_from("<QQI", orig, e + 32)
    sec[name] = (e, off, size, crc)
e, off, size, crc = sec["manifest"]
man = orig[off:off + size].decode()
assert crc32c(orig[off:off + size]) == crc, "crc32c disagrees with the bundle's"
# the optional cost line makes room for longer edits; a comment pads back
base = "\n".join(l for l in man.split("\n") if not l.startswith("cost "))

def bundle(text):
    """The bundle with this manifest (a comment pads it to the old size), every CRC recomputed."""
    body = text.encode()
    assert size - len(body) >= 2, "edit too long"
    body += b"#" + b" " * (size - len(body) - 2) + b"\n"
    b = bytearray(orig)
    b[off:off + size] = body
    struct.pack_into("<I", b, e + 48, crc32c(bytes(b[off:off + size])))
    struct.pack_into("<I", b, 40, crc32c(bytes(b[64:64 + 64 * n])))
    struct.pack_into("<I", b, 44, crc32c(bytes(b[0:44])))
    return bytes(b)

cases = [
    ("unedited", None, None, 0, "ok: format 1"),
    ("bytes= not dtype x dims", "bf16 64,64 bytes=8192", "bf16 64,64 bytes=8190", 2,
     "weight 'w' is bytes=8190, but bf16[4096 elements] takes 8192"),
    ("dims changed, bytes= kept", "bf16 64,64 bytes=8192", "bf16 64,96 bytes=8192", 2,
     "weight 'w' is bytes=8192, but bf16[6144 elements] takes 12288"),
    ("dims product overflows", "bf16 64,64 bytes", "bf16 4294967296,4294967296,64 bytes", 2,
     "weight 'w' has more than 2^48 elements"),
    ("tokens: a gap", "tokens=65..4096", "tokens=66..4096", 2,
     "tokens=66..4096 leaves T=65..65 to no launch variant"),
    ("tokens: an overlap", "tokens=65..4096", "tokens=60..4096", 2,
     "tokens=60..4096 overlaps the variant before it (T=60..64 run twice)"),
    ("tokens: not up to max_tokens", "tokens=65..4096", "tokens=65..4000", 2,
     "end at T=4000: T=4001..4096 launches no variant"),
    ("tokens: not from 1", "tokens=1..64", "tokens=2..64", 2,
     "tokens=2..64 leaves T=1..1 to no launch variant"),
]
fail = 0
for name, old, new, want, msg in cases:
    text = base if old is None else base.replace(old, new, 1)
    assert old is None or text != base, name
    path = tmp + "/m.moeb"
    open(path, "wb").write(bundle(text))
    r = subprocess.run([moert, "verify", path], capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode != want or msg not in out or "CRC" in out:
        print("FAIL %s: exit %d (want %d)\n     %s\n     (wanted: %s)" %
              (name, r.returncode, want, out.strip().replace("\n", "\n     "), msg))
        fail = 1
    else:
        print("ok   %s: %s" % (name, msg))
sys.exit(fail)
PY

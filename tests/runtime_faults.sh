#!/bin/sh
# runtime_faults.sh SRCDIR BUILDDIR — the runtime's refusals through the moert
# command line, with no GPU: a small bundle is compiled, then damaged or fed
# wrong inputs, and each fault must give its own message (and exit 2 for bad
# input, 1 for what the machine refused).  The status codes themselves, the
# wrong architecture and every single flipped byte are tested in
# tests/unit/check_runtime.c.  Under the sanitized build this also checks
# that every refusal path is free of leaks.
src=$1 build=$2
moec=$build/tools/moec moert=$build/tools/moert
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
export MOERT_LIBCUDA=/nonexistent/libcuda.so.1

# expect CODE NAME TEXT CMD...: CMD exits CODE with TEXT in its stderr
expect() {
	code=$1 name=$2 text=$3
	shift 3
	n=$((n + 1))
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "$code" ] || { [ -n "$text" ] && ! grep -qF -- "$text" "$tmp/err"; }; then
		echo "FAIL $name: exit $rc (want $code), stderr:"
		sed 's/^/     /' "$tmp/err" | head -5
		echo "     (wanted: $text)"
		fail=1
	else
		echo "ok   $name${text:+: $text}"
	fi
}

# x: f32[T,8] -> y: f32[T,8], max_tokens 16
printf 'graph @g(%%x: f32[T,8]) -> (y: f32[T,8]) {\n\t%%y = relu %%x : f32[T,8]\n\tret %%y\n}\n' \
	>"$tmp/g.ir"
"$moec" compile "$tmp/g.ir" --arch=sm_80 --max-tokens=16 -o "$tmp/g.moeb" 2>"$tmp/err" ||
	{ cat "$tmp/err"; exit 1; }
python3 - "$tmp" <<'PY' || exit 2
import struct, sys
def npy(path, descr, shape, nbytes):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    h += " " * (63 - (len(h) + 10) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()
                           + bytes(nbytes))
d = sys.argv[1]
npy(d + "/x.npy", "<f4", (4, 8), 4 * 32)
npy(d + "/x64.npy", "<f8", (4, 8), 8 * 32)
npy(d + "/x9.npy", "<f4", (4, 9), 4 * 36)
npy(d + "/x17.npy", "<f4", (17, 8), 4 * 17 * 8)
npy(d + "/short.npy", "<f4", (4, 8), 4 * 31)
b = bytearray(open(d + "/g.moeb", "rb").read())
open(d + "/trunc.moeb", "wb").write(b[:-1])
f = bytearray(b); f[len(b) // 2] ^= 0x20
open(d + "/flip.moeb", "wb").write(f)
v = bytearray(b); v[8:12] = struct.pack("<I", 3)
open(d + "/v3.moeb", "wb").write(v)
PY
g=$tmp/g.moeb
# moert verify exits 2 on a refused bundle, as moec inspect and moert run do
# for a bad bundle or bad inputs, 1 for what the machine refused
expect 0 "verify" "" "$moert" verify "$g"
expect 2 "verify: truncated" "header.size: error: file size field says" \
	"$moert" verify "$tmp/trunc.moeb"
expect 2 "verify: a flipped byte" "section 'ptx:sm_80': error: CRC mismatch" \
	"$moert" verify "$tmp/flip.moeb"
expect 2 "verify: format version 3" "header.version: error: format version 3, this reader supports 1 and 2" \
	"$moert" verify "$tmp/v3.moeb"
expect 2 "run: truncated" "header.size: file size field says" "$moert" run "$tmp/trunc.moeb" --input "x=$tmp/x.npy"
expect 2 "run: a flipped byte" "MOERT_EFORMAT: section 'ptx:sm_80': error: CRC mismatch" \
	"$moert" run "$tmp/flip.moeb" --input "x=$tmp/x.npy"
expect 2 "run: format version 3" "header.version: format version 3, this reader supports 1 and 2" \
	"$moert" run "$tmp/v3.moeb" --input "x=$tmp/x.npy"
expect 2 "run: no bundle" "none.moeb: cannot open: No such file or directory" \
	"$moert" run "$tmp/none.moeb" --input "x=$tmp/x.npy"
expect 2 "run: wrong dtype" "input 'x' has dtype f64, the bundle declares f32[T,8]" \
	"$moert" run "$g" --input "x=$tmp/x64.npy"
expect 2 "run: wrong shape" "input 'x' dim 1 is 9, the bundle declares f32[T,8]" \
	"$moert" run "$g" --input "x=$tmp/x9.npy"
expect 2 "run: T above max_tokens" "input 'x' dim 0 implies T=17, outside 1..16 (max_tokens)" \
	"$moert" run "$g" --input "x=$tmp/x17.npy"
expect 2 "run: truncated input" "short.npy: truncated .npy data: 124 of 128 bytes" \
	"$moert" run "$g" --input "x=$tmp/short.npy"
expect 2 "run: unknown input" "has no input named 'z'" "$moert" run "$g" --input "z=$tmp/x.npy"
expect 1 "run: no libcuda" "MOERT_ENODRIVER: cannot load the CUDA driver: /nonexistent/libcuda.so.1" \
	"$moert" run "$g" --input "x=$tmp/x.npy"
# -o DIR (docs/cli.md): created, and checked against the inputs, before the device
touch "$tmp/file"
expect 2 "run: -o under a file" "file/out: cannot create the folder: Not a directory" \
	"$moert" run "$g" --input "x=$tmp/x.npy" -o "$tmp/file/out"
expect 1 "run: -o DIR made first" "MOERT_ENODRIVER" "$moert" run "$g" --input "x=$tmp/x.npy" -o "$tmp/made"
n=$((n + 1))
[ -d "$tmp/made" ] && echo "ok   run: -o DIR exists" || { echo "FAIL run: -o DIR not made"; fail=1; }
mkdir -p "$tmp/o" && cp "$tmp/x.npy" "$tmp/o/y.npy"
expect 2 "run: an output over an input" "o/y.npy: output 0 would overwrite an input file" \
	"$moert" run "$g" --input "x=$tmp/o/y.npy" -o "$tmp/o"
expect 2 "run: a bad option value" "moert run: error: --tokens: 'x' is not an integer" \
	"$moert" run "$g" --input "x=$tmp/x.npy" --tokens x
expect 2 "test: --tile with a zero" "--tile: '7,0' wants up to 16 token counts in 1..2147483647" \
	"$moert" test "$g" "$tmp" --tile=7,0
expect 2 "test: --tile with no counts" "--tile: ',' wants token counts" \
	"$moert" test "$g" "$tmp" --tile=,
echo "runtime faults: $n checks, $([ $fail -eq 0 ] && echo "all as expected" || echo FAILURES)"
exit $fail

#!/bin/sh
# fastdiv_check.sh here MOEC DIR | device DIR — the branch-free divisions of
# tanh and erf (docs/codegen.md, "Division without a branch") against div.rn
# (--debug=div-rn) on the GPU, bit for bit, over every float with |x| from
# 2^-14 to 128 (tanh's and erf's divisors of every size the clamps leave,
# GELU's cube): tanh and GELU (tanh, erf) of bench/models/fastdiv.ir,
# compiled with and without the flag, run on the same inputs in chunks of
# 16384 x 4096, outputs compared as bits (NaN as NaN).  One line a chunk:
#
#	fastdiv chunk 3 x 0x38800000..0x3c800000 diff 0 of 67108864 ok
#
# Exit 1 on a difference or a failed run.  Needs python3 with numpy.
set -u
mode=$1
src=$(cd "$(dirname "$0")/.." && pwd)
case $mode in
here)
	moec=$2 out=$3
	mkdir -p "$out" || exit 1
	"$moec" compile "$src/bench/models/fastdiv.ir" --arch=sm_90a --max-tokens=16384 -q \
		--debug=div-rn -o "$out/div.moeb" &&
		"$moec" compile "$src/bench/models/fastdiv.ir" --arch=sm_90a --max-tokens=16384 -q \
			-o "$out/fast.moeb" || exit 1
	echo "ok   $out/div.moeb $out/fast.moeb"
	;;
device)
	dir=$2
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
	# chunks: [start, end) in float bits, positive and negative
	python3 - "$tmp" <<'PY' > "$tmp/chunks" || exit 1
n = 16384 * 4096
ranges = [(113 << 23, 134 << 23), ((113 << 23) | 1 << 31, (134 << 23) | 1 << 31)]
for a, b in ranges:
    for s in range(a, b, n):
        print(s, min(s + n, b))
PY
	rc=0 i=0
	while read -r a b; do
		python3 -c "import numpy as np; x = np.arange($a, $b, dtype=np.uint64).astype(np.uint32); \
x = np.concatenate([x, np.full((-len(x)) % 4096, x[-1], np.uint32)]); \
np.save('$tmp/x.npy', x.view(np.float32).reshape(-1, 4096))" </dev/null || exit 1
		for v in div fast; do
			"$tmp/moert" run "$dir/$v.moeb" --input=x="$tmp/x.npy" -o "$tmp/$v" </dev/null >/dev/null 2>"$tmp/err" ||
				{ echo "fastdiv chunk $i $v FAILED: $(head -c 300 "$tmp/err")"; rc=1; }
		done
		python3 - "$tmp" "$i" "$a" "$b" <<'PY' || rc=1
import sys
import numpy as np
t, i, a, b = sys.argv[1:]
bad = 0
for o in "abc":
    p = np.load("%s/div/%s.npy" % (t, o)).view(np.uint32)
    q = np.load("%s/fast/%s.npy" % (t, o)).view(np.uint32)
    nan = ((p & 0x7fffffff) > 0x7f800000) & ((q & 0x7fffffff) > 0x7f800000)
    d = (p != q) & ~nan
    if d.any():
        x = np.load("%s/x.npy" % t).view(np.uint32)
        k = np.flatnonzero(d)[:3]
        print("fastdiv %s differs at x bits %s: %s against %s" % (o, [hex(v) for v in x.reshape(-1)[k]],
              [hex(v) for v in q.reshape(-1)[k]], [hex(v) for v in p.reshape(-1)[k]]))
    bad += int(d.sum())
print("fastdiv chunk %s x %#x..%#x diff %d of %d %s" % (i, int(a), int(b), bad, int(b) - int(a), "ok" if bad == 0 else "DIFFERENT"))
sys.exit(1 if bad else 0)
PY
		i=$((i + 1))
	done < "$tmp/chunks"
	exit $rc
	;;
*)
	echo "usage: fastdiv_check.sh here MOEC DIR | device DIR" >&2
	exit 2
	;;
esac

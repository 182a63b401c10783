#!/bin/sh
# same_outputs.sh LABEL=DIR... — on the GPU machine: the bench cases of
# several bench/make_bench.sh outputs (different launch plans of the same
# graphs: clusters, tile variants) run on the same input, each output
# compared with the first DIR's.  For the kernels the emulator cannot check
# (clusters of CTAs: docs/codegen.md).  Dense cases only (an MoE block's
# routing makes a fresh input per plan a different problem); T from
# cases.txt.  One line a case and DIR:
#
#	same dense_up_M4096 T=4096 c2 max_abs=0.0039 rel_l2=0.00021 ok
#
# Exit 1 when a run fails or rel_l2 >= 1e-2 (the bf16 outputs of two tilings
# differ by rounding at most).  Needs python3 with numpy.
set -u
[ $# -ge 2 ] || { echo "usage: same_outputs.sh LABEL=DIR LABEL=DIR..." >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
first=${1#*=}
rc=0
while read -r name bundle tokens kind _; do
	{ [ -n "$name" ] && [ "$kind" = dense ]; } || continue
	python3 -c "import numpy as np; np.random.seed(7); \
np.save('$tmp/x.npy', np.random.uniform(-1, 1, ($tokens, 4096)).astype(np.float32))" || exit 1
	i=0
	for ld in "$@"; do
		mkdir -p "$tmp/out$i"
		"$tmp/moert" run "${ld#*=}/$bundle" --input=x="$tmp/x.npy" -o "$tmp/out$i" >/dev/null 2>"$tmp/err$i" ||
			{ echo "same $name T=$tokens ${ld%%=*} FAILED: $(head -c 300 "$tmp/err$i")"; rc=1; }
		i=$((i + 1))
	done
	i=0
	for ld in "$@"; do
		if [ "$i" -gt 0 ] && [ -s "$tmp/out$i/y.npy" ] && [ -s "$tmp/out0/y.npy" ]; then
			python3 - "$tmp/out0/y.npy" "$tmp/out$i/y.npy" "$name" "$tokens" "${ld%%=*}" <<'PY' || rc=1
import sys
import numpy as np
a = np.load(sys.argv[1]).astype(np.float64)
b = np.load(sys.argv[2]).astype(np.float64)
d = np.abs(a - b)
rel = float(np.sqrt((d * d).sum() / max((a * a).sum(), 1e-30)))
ok = a.shape == b.shape and np.isfinite(b).all() and rel < 1e-2
print("same %s T=%s %s max_abs=%.3g rel_l2=%.3g %s" % (sys.argv[3], sys.argv[4], sys.argv[5], d.max(), rel,
                                                      "ok" if ok else "DIFFERENT"))
sys.exit(0 if ok else 1)
PY
		fi
		i=$((i + 1))
	done
done <"$first/cases.txt"
exit $rc

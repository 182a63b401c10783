#!/bin/sh
# run_decode.sh DIR [T] — on the GPU machine: every bundle of make_decode.sh
# (DIR/cases.txt) benched at T=16 (or T) as a CUDA graph (moert bench
# --graph, 300 iterations, median) by decode_table.py, against a device copy
# in the same run: µs, the weight bytes the run touched (packed bytes for the
# quantised cases; for MoE blocks only the experts the routing picked, read
# back from the bundle's offsets), GB/s over them, % of copy, the speedup
# over its bf16 pair, and the MoE blocks' steps alone.  Builds moert with
# tests/gpu/build_moert.sh.  Exit 0, 1 a bench failed, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$1
B=${BUILD:-/tmp/moert-decode}
tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 1; }
"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
"$B/moert" info
rc=0
R=${OUT:-$B}	# full logs and the tuning tables (the device's $OUT comes back)
TMPDIR=$B python3 bench/quant/decode_table.py "$B/moert" "$dir" "${2:-16}" >"$R/decode.txt" 2>&1 || rc=1
grep -E "^copy rate|^FAIL" "$R/decode.txt"
sed -n '/^case /,$p' "$R/decode.txt"
# the candidate bundles: each GEMM's variants timed alone at T (moert tune);
# R/NAME.tuning feeds make_decode.sh's compiles back here (moec compile
# --tuning); the per-key comments say the chosen variant's time against the plan's
for c in "$dir"/*.cand.moeb; do
	[ -f "$c" ] || continue
	n=$(basename "$c" .cand.moeb)
	echo "== moert tune $n --tokens=${2:-16} (every candidate: $R/$n.tune.log)"
	timeout -k 5 150 "$B/moert" tune "$c" -o "$R/$n.tuning" --tokens="${2:-16}" --iters=30 \
		>"$R/$n.tune.log" 2>&1 || { rc=1; tail -3 "$R/$n.tune.log"; }
	grep -v "^moec-tuning\|dense\.m1\.n32\." "$R/$n.tuning" 2>/dev/null
done
exit $rc

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
TMPDIR=$B python3 bench/quant/decode_table.py "$B/moert" "$dir" "${2:-16}" || rc=1
# the candidate bundles: each GEMM's variants timed alone at T (moert tune);
# the tables (OUT/NAME.tuning where OUT is set, else next to moert) feed
# make_decode.sh's compiles back here (moec compile --tuning)
for c in "$dir"/*.cand.moeb; do
	[ -f "$c" ] || continue
	t=${OUT:-$B}/$(basename "$c" .cand.moeb).tuning
	echo "== moert tune $(basename "$c") --tokens=${2:-16}"
	timeout -k 5 240 "$B/moert" tune "$c" -o "$t" --tokens="${2:-16}" --iters=30 >"$B/tune.log" 2>&1 || rc=1
	grep -E "^T=|WRONG|error" "$B/tune.log" | grep -v " dense\.m1\.n32\." 
	cat "$t" 2>/dev/null
done
exit $rc

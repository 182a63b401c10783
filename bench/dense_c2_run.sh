#!/bin/sh
# dense_c2_run.sh — the A/B of --debug=dense-c2 (session 37, issue 12) with torch's mm in the same run.
# Here:   sh bench/ab.sh prepare bench/ab/dense_c2.ab MOEC MAIN_MOEC DIR/ab
#         cp bench/dense_c2_run.sh DIR/run.sh; cp bench/dense_mm_ref.py DIR/
# Device: OUT=<dir> sh DIR/run.sh, from the root of a checkout (~90 s).
# 1. bench/ab.sh's A/B (DIR/ab): each arm's y against main's first (the same bits expected), then
#    interleaved rounds of moert bench --graph: dense_up at M = 4096, 1024 and 1100 (9 row tiles: the last
#    cluster pair's second tile has no rows), DeepSeek-V3 layer 3 at T = 4096 (its shared expert's dense
#    GEMMs k5, k6 take the clusters too); Mixtral's bundle is main's byte for byte, so it is not an arm.
#    The flag: the 1025..4096 bucket in clusters of 2 sharing B (128x256, TMA stores), and every TMA-store
#    epilogue's wait for its buffer after the block's math (M = 1024's ping-pong kernel too).
# 2. dense_up M = 4096 without --graph (plain launches), 3 interleaved rounds.
# 3. torch's mm at M = 4096 and 1024, three ways (bench/dense_mm_ref.py), each arm against it.
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:?}"
mkdir -p "$OUT"
RUN_S=${RUN_S:-50} HARD_S=${HARD_S:-66} sh "$here/ab/run.sh" >"$OUT/ab.log" 2>&1
sh tests/gpu/build_moert.sh "$OUT/moert" >/dev/null 2>&1 || echo "build_moert failed"
t=$(mktemp -d)
for a in main c2; do xz -d -c "$here/ab/$a.dense.moeb.xz" >"$t/$a.moeb"; done
for r in 1 2 3; do
	for a in main c2; do
		us=$(timeout 30 "$OUT/moert" bench "$t/$a.moeb" --tokens=4096 --iters=50 2>&1 |
			sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
		echo "plain dense4096 arm=$a round=$r us=${us:-FAILED}"
	done
done >"$OUT/plain.txt"
rm -rf "$t" "$OUT/moert"
timeout 40 python3 "$here/dense_mm_ref.py" "$OUT/dense_c2/ab.txt" 4096 1024 >"$OUT/mm.txt" 2>&1
echo "== the A/B (bench/ab.sh's table; logs in \$OUT/ab.log, \$OUT/dense_c2/)"
sed -n '/^== correctness/,$p' "$OUT/dense_c2/table.txt"
echo "== without --graph (moert bench, us)"
cat "$OUT/plain.txt"
echo "== torch mm in the same run"
cat "$OUT/mm.txt"

#!/bin/sh
# router_ab.sh compile MOEC OUTDIR — DeepSeek-V3 layer 3 (make_bench.sh's
#   deepseek_T16, deepseek_T256 and deepseek_T4096: synthetic weights, sm_90a)
#   in these arms (OUTDIR/ARM/CASE.moeb):
#     split  split-f32's router: the f32 gate weight as bf16 hi + mid + lo, one
#            bf16 GEMM over 3K on tensor cores (128x64 tiles at T = 4096, 64x64
#            split-K 16 up to T = 256); T16: with --debug=no-front (a decode
#            bundle's front keeps the f32 router: no front, so the split)
#     simt   --debug=simt-router: the f32 router GEMM on CUDA cores (before;
#            T16: with --debug=no-front too)
#     t128   T4096: the split router on 128x128 tiles at T = 1025..4096
#            (bench/router_128x128.tuning: 64 CTAs, the tile before rep_tiles)
#     front  T16: the default, the decode front (norm, f32 router, route and
#            permute in one launch; k_front.c)
# router_ab.sh run MOERT OUTDIR — on the device: each bundle as a CUDA graph
#   with a per-step profile (moert bench --graph --profile), the routing
#   (moe.ids, moe.offs, moe.rows) and router_logits dumped and compared with
#   the simt arm's, then one table: case, arm, block us, router us (k0, or the
#   front), routing against simt.  The logits differ in the last f32 places
#   (summation order), so a difference in ids is reported (a near tie), not
#   fatal.
set -eu
cmd=$1 tool=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
cases="deepseek_T16:16 deepseek_T256:256 deepseek_T4096:4096"
arm() {	# arm NAME ONLY FLAGS
	ONLY=$2 MOEC_FLAGS=$3 sh "$src/bench/make_bench.sh" "$tool" "$out/$1"
}
if [ "$cmd" = compile ]; then
	arm split '^deepseek_T(256|4096)$' ""
	arm split '^deepseek_T16$' --debug=no-front
	arm simt '^deepseek_T(256|4096)$' --debug=simt-router
	arm simt '^deepseek_T16$' --debug=simt-router,no-front
	arm t128 '^deepseek_T4096$' "--tuning=$src/bench/router_128x128.tuning"
	arm front '^deepseek_T16$' ""
	exit 0
fi
[ "$cmd" = run ] || { echo "usage: router_ab.sh compile MOEC OUTDIR | run MOERT OUTDIR" >&2; exit 2; }
rc=0
table=$out/table.txt
printf '%-16s %-6s %10s %10s  %s\n' case arm block_us router_us "routing vs simt" > "$table"
for c in $cases; do
	n=${c%%:*} t=${c##*:}
	for a in simt split t128 front; do
		b="$out/$a/$n.moeb"
		[ -f "$b" ] || continue
		log="$out/$a/$n.bench.log"
		echo "--- $a $n T=$t"
		"$tool" bench "$b" --tokens="$t" --graph --profile \
			--dump=moe.ids="$out/$a/$n.ids" --dump=moe.offs="$out/$a/$n.offs" \
			--dump=moe.rows="$out/$a/$n.rows" --dump=router_logits="$out/$a/$n.logits" \
			>"$log" 2>&1 || rc=1
		cat "$log"
		block=$(sed -n 's/.*median_us=\([0-9.]*\).*/\1/p' "$log" | head -1)
		router=$(awk '$1 ~ /_k0$|_front$/ {print $2; exit}' "$log")
		same=""
		if [ "$a" != simt ]; then
			for buf in ids offs rows logits; do
				if cmp -s "$out/$a/$n.$buf" "$out/simt/$n.$buf"; then
					same="$same $buf=same"
				else
					same="$same $buf=DIFF($(cmp -l "$out/$a/$n.$buf" "$out/simt/$n.$buf" | wc -l)B)"
				fi
			done
		fi
		printf '%-16s %-6s %10s %10s %s\n' "$n" "$a" "${block:-?}" "${router:-?}" "$same" >> "$table"
	done
done
echo
cat "$table"
exit $rc

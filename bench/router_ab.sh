#!/bin/sh
# router_ab.sh compile MOEC OUTDIR — DeepSeek-V3 layer 3 (make_bench.sh's
#   deepseek_T256 and deepseek_T4096, synthetic weights, sm_90a) in three arms:
#     split  the default: split-f32's router, the f32 gate weight as bf16
#            hi + mid + lo, one bf16 GEMM over 3K on tensor cores (128x64 tiles at
#            T = 4096, 64x64 split-K 16 at T <= 256)
#     simt   --debug=simt-router: the f32 router GEMM on CUDA cores (before)
#     t128   the split router on 128x128 tiles at T = 1025..4096
#            (bench/router_128x128.tuning: 64 CTAs, the tile before rep_tiles)
# router_ab.sh run MOERT OUTDIR — on the device: each bundle as a CUDA graph
#   with a per-step profile (moert bench --graph --profile), the routing
#   (moe.ids, moe.offs, moe.rows) and router_logits dumped and compared with
#   the simt arm's, then one table: case, arm, block us, router (k0) us, ids.
#   The logits differ in the last f32 places (summation order), so a
#   difference in ids is reported (a near tie), not fatal.
set -eu
cmd=$1 tool=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
cases="deepseek_T256:256 deepseek_T4096:4096"
only='^deepseek_T(256|4096)$'
if [ "$cmd" = compile ]; then
	ONLY=$only sh "$src/bench/make_bench.sh" "$tool" "$out/split"
	ONLY=$only MOEC_FLAGS=--debug=simt-router sh "$src/bench/make_bench.sh" "$tool" "$out/simt"
	ONLY='^deepseek_T4096$' MOEC_FLAGS=--tuning=$src/bench/router_128x128.tuning \
		sh "$src/bench/make_bench.sh" "$tool" "$out/t128"
	exit 0
fi
[ "$cmd" = run ] || { echo "usage: router_ab.sh compile MOEC OUTDIR | run MOERT OUTDIR" >&2; exit 2; }
rc=0
table=$out/table.txt
printf '%-16s %-6s %10s %10s  %s\n' case arm block_us k0_us "routing vs simt" > "$table"
for c in $cases; do
	n=${c%%:*} t=${c##*:}
	for arm in simt split t128; do
		b="$out/$arm/$n.moeb"
		[ -f "$b" ] || continue
		log="$out/$arm/$n.bench.log"
		echo "--- $arm $n T=$t"
		"$tool" bench "$b" --tokens="$t" --graph --profile \
			--dump=moe.ids="$out/$arm/$n.ids" --dump=moe.offs="$out/$arm/$n.offs" \
			--dump=moe.rows="$out/$arm/$n.rows" --dump=router_logits="$out/$arm/$n.logits" \
			>"$log" 2>&1 || rc=1
		cat "$log"
		block=$(sed -n 's/.*median_us=\([0-9.]*\).*/\1/p' "$log" | head -1)
		k0=$(awk '$1 ~ /_k0$/ {print $2; exit}' "$log")
		same=""
		if [ "$arm" != simt ]; then
			for buf in ids offs rows logits; do
				if cmp -s "$out/$arm/$n.$buf" "$out/simt/$n.$buf"; then
					same="$same $buf=same"
				else
					same="$same $buf=DIFF($(cmp -l "$out/$arm/$n.$buf" "$out/simt/$n.$buf" | wc -l)B)"
				fi
			done
		fi
		printf '%-16s %-6s %10s %10s %s\n' "$n" "$arm" "${block:-?}" "${k0:-?}" "$same" >> "$table"
	done
done
echo
cat "$table"
exit $rc

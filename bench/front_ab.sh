#!/bin/sh
# front_ab.sh compile MOEC OUTDIR [MAIN_MOEC] — here: the decode cases of make_bench.sh
#   (qwen3_T1, qwen3_T16, mixtral_T16, deepseek_T16, gptoss_T16) with the decode front
#   (OUTDIR/NAME.moeb), without it (OUTDIR/NAME.nofront.moeb, --debug=no-front) and,
#   given another moec (e.g. main's), with that one's front (OUTDIR/NAME.main.moeb).
# front_ab.sh run MOERT OUTDIR — on the device: each case timed as a CUDA graph
#   with a per-step profile (OUTDIR/NAME[.variant].log), then one table: the block's
#   median and the front step (or, without a front, the norm, router GEMM, route and
#   permute steps) per variant, and the routing the variants leave in the arena
#   (moe.ids, moe.offs, moe.rows; router_logits) compared byte for byte against the
#   front's: .main must be the same bits (the same summation order); .nofront's
#   logits may differ in the last bf16 place (CUDA-core dot products against the
#   tensor-core GEMM), so a difference is reported, not fatal; the bench itself
#   fails on any output element left unwritten.
set -eu
cmd=$1 tool=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
cases="qwen3_T1:1 qwen3_T16:16 mixtral_T16:16 deepseek_T16:16 gptoss_T16:16"
only='^(qwen3_T1|qwen3_T16|mixtral_T16|deepseek_T16|gptoss_T16)$'
if [ "$cmd" = compile ]; then
	ONLY=$only sh "$src/bench/make_bench.sh" "$tool" "$out"
	for v in nofront main; do
		if [ $v = nofront ]; then
			mkdir -p "$out/$v"
			ONLY=$only MOEC_FLAGS=--debug=no-front sh "$src/bench/make_bench.sh" "$tool" "$out/$v"
		elif [ -n "${4:-}" ]; then
			mkdir -p "$out/$v"
			ONLY=$only sh "$src/bench/make_bench.sh" "$4" "$out/$v"
		else
			continue
		fi
		for c in $cases; do
			n=${c%%:*}
			mv "$out/$v/$n.moeb" "$out/$n.$v.moeb"
		done
	done
	exit 0
fi
[ "$cmd" = run ] || { echo "usage: front_ab.sh compile MOEC OUTDIR [MAIN_MOEC] | run MOERT OUTDIR" >&2; exit 2; }
rc=0
table=""
for c in $cases; do
	n=${c%%:*} t=${c##*:}
	for v in "" .main .nofront; do
		b="$out/$n$v.moeb"
		[ -f "$b" ] || continue
		"$tool" bench "$b" --tokens="$t" --graph --profile \
			--dump=moe.ids="$out/$n$v.ids" --dump=moe.offs="$out/$n$v.offs" \
			--dump=moe.rows="$out/$n$v.rows" --dump=router_logits="$out/$n$v.logits" \
			> "$out/$n$v.log" 2>&1 || { rc=1; echo "FAILED $n$v:"; tail -5 "$out/$n$v.log"; }
		med=$(sed -n 's/.*: median \([0-9.]*\) us.*/\1/p' "$out/$n$v.log" | head -1)
		# the front's step, or the steps it replaces (k*_front; else norm, router, route, permute)
		front=$(awk '/_front /{s += $2} END {if (s) printf "%.2f", s}' "$out/$n$v.log")
		same=""
		if [ -n "$v" ]; then
			for buf in ids offs rows logits; do
				if cmp -s "$out/$n.$buf" "$out/$n$v.$buf"; then
					same="$same $buf=same"
				else
					same="$same $buf=DIFF"
					[ "$v" = .main ] && [ "$n" != gptoss_T16 ] && rc=1	# main: no front there
				fi
			done
		fi
		table="$table$(printf '%-14s %-9s block %8s us  front %8s us %s' "$n" "${v:-.front}" "${med:-?}" \
			"${front:--}" "$same")
"
	done
done
printf '%s' "$table"
echo "(front: the *_front step alone, median us; the full per-step profiles: OUTDIR/NAME[.variant].log)"
exit $rc

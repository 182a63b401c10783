#!/bin/sh
# front_ab.sh compile MOEC OUTDIR — here: the decode cases of make_bench.sh
#   (qwen3_T1, qwen3_T16, mixtral_T16, deepseek_T16) with the decode front
#   (OUTDIR/NAME.moeb) and without it (OUTDIR/NAME.nofront.moeb, --debug=no-front).
# front_ab.sh run MOERT OUTDIR — on the device: each case timed as a CUDA graph
#   with a per-step profile, with and without the front, and the routing the
#   two leave in the arena (moe.ids, moe.offs, moe.rows; router_logits) compared
#   byte for byte: the logits may differ in the last bf16 place (CUDA-core dot
#   products against the tensor-core GEMM), so a difference in ids is reported,
#   not fatal; the bench itself fails on any output element left unwritten.
set -eu
cmd=$1 tool=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
cases="qwen3_T1:1 qwen3_T16:16 mixtral_T16:16 deepseek_T16:16"
if [ "$cmd" = compile ]; then
	ONLY='^(qwen3_T1|qwen3_T16|mixtral_T16|deepseek_T16)$' sh "$src/bench/make_bench.sh" "$tool" "$out"
	mkdir -p "$out/nofront"
	ONLY='^(qwen3_T1|qwen3_T16|mixtral_T16|deepseek_T16)$' MOEC_FLAGS=--debug=no-front \
		sh "$src/bench/make_bench.sh" "$tool" "$out/nofront"
	for c in $cases; do
		n=${c%%:*}
		mv "$out/nofront/$n.moeb" "$out/$n.nofront.moeb"
	done
	exit 0
fi
[ "$cmd" = run ] || { echo "usage: front_ab.sh compile MOEC OUTDIR | run MOERT OUTDIR" >&2; exit 2; }
rc=0
for c in $cases; do
	n=${c%%:*} t=${c##*:}
	for v in "" .nofront; do
		b="$out/$n$v.moeb"
		echo "--- $n$v T=$t"
		"$tool" bench "$b" --tokens="$t" --graph --profile \
			--dump=moe.ids="$out/$n$v.ids" --dump=moe.offs="$out/$n$v.offs" \
			--dump=moe.rows="$out/$n$v.rows" --dump=router_logits="$out/$n$v.logits" || rc=1
	done
	for buf in ids offs rows logits; do
		if cmp -s "$out/$n.$buf" "$out/$n.nofront.$buf"; then
			echo "same $n $buf"
		else
			echo "DIFF $n $buf ($(cmp -l "$out/$n.$buf" "$out/$n.nofront.$buf" | wc -l) bytes)"
		fi
	done
done
exit $rc

#!/bin/sh
# make_bench.sh MOEC OUTDIR — compile the benchmark bundles (synthetic
# weights) for bench/run_bench.py: the dense FFN up-projection at three
# token counts, and the MoE blocks of real configs at decode and prefill
# sizes.  Writes OUTDIR/cases.txt: "name bundle tokens kind model".
# sm_90a only (the H200 runs them; the bundles stay small enough to carry:
# weights are generated on the device).  MOEC_FLAGS adds flags to every
# compile (e.g. --tuning=FILE).
set -eu
moec=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
: > "$out/cases.txt"
one() {	# one NAME TOKENS KIND MODEL [moec flags...]
	name=$1 tokens=$2 kind=$3 model=$4
	shift 4
	# shellcheck disable=SC2086
	"$moec" compile "$@" --arch=sm_90a ${MOEC_FLAGS:-} --max-tokens="$tokens" -o "$out/$name.moeb" \
		2>"$out/$name.log" ||
		{ cat "$out/$name.log"; exit 1; }
	echo "$name $name.moeb $tokens $kind $model" >> "$out/cases.txt"
	echo "ok   $name"
}
for m in 16 1024 4096; do
	one "dense_up_M$m" $m dense dense "$src/bench/models/dense_up.ir"
done
one mixtral_T16 16 moe mixtral-8x7b "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
one mixtral_T4096 4096 moe mixtral-8x7b "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T16 16 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T4096 4096 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T1 1 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one deepseek_T16 16 moe deepseek-v3 "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
one deepseek_T256 256 moe deepseek-v3 "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
one deepseek_T4096 4096 moe deepseek-v3 "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
one gptoss_T16 16 moe gpt-oss-20b "$src/models/gpt-oss-20b/config.json" --layer 0 --synthetic-weights=1
one gptoss_T4096 4096 moe gpt-oss-20b "$src/models/gpt-oss-20b/config.json" --layer 0 --synthetic-weights=1

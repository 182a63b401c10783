#!/bin/sh
# make_bench.sh MOEC OUTDIR — compile the benchmark bundles (synthetic
# weights) for bench/run_bench.py: the dense FFN up-projection at three
# token counts, and the MoE blocks of real configs at decode and prefill
# sizes.  Writes OUTDIR/cases.txt: "name bundle tokens kind model".
# sm_90a only (the H200 runs them; the bundles stay small enough to carry:
# weights are generated on the device).  MOEC_FLAGS adds flags to every
# compile (e.g. --tuning=FILE, or --tune-candidates for bench/tune_bench.sh);
# ONLY=REGEX compiles only the cases whose name matches (grep -E).
set -eu
moec=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
: > "$out/cases.txt"
one() {	# one NAME TOKENS KIND MODEL [moec flags...]
	name=$1 tokens=$2 kind=$3 model=$4
	shift 4
	if [ -n "${ONLY:-}" ] && ! echo "$name" | grep -Eq "$ONLY"; then return 0; fi
	# shellcheck disable=SC2086
	"$moec" compile "$@" --arch=sm_90a ${MOEC_FLAGS:-} --max-tokens="$tokens" -o "$out/$name.moeb" \
		2>"$out/$name.log" ||
		{ cat "$out/$name.log"; exit 1; }
	echo "$name $name.moeb $tokens $kind $model" >> "$out/cases.txt"
	echo "ok   $name"
}
# The bf16 blocks of the quantised checkpoints (DeepSeek-V3 fp8, gpt-oss mxfp4):
# their configs without quantization_config.  Synthetic weights of a quantised
# layer are generated and repacked on the host (docs/config.md): DeepSeek-V3's
# fp8 layer would be an 11 GB bundle and a 17 GB compile.
bf16cfg() {	# bf16cfg MODEL: OUT/MODEL-bf16/config.json
	mkdir -p "$out/$1-bf16"
	python3 "$src/bench/bf16_config.py" "$src/models/$1/config.json" "$out/$1-bf16/config.json" || exit 1
}
bf16cfg deepseek-v3
bf16cfg gpt-oss-20b
for m in 16 1024 4096; do
	one "dense_up_M$m" $m dense dense "$src/bench/models/dense_up.ir"
done
one mixtral_T16 16 moe mixtral-8x7b "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
one mixtral_T4096 4096 moe mixtral-8x7b "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T16 16 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T4096 4096 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one qwen3_T1 1 moe qwen3-30b-a3b "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
one deepseek_T16 16 moe deepseek-v3 "$out/deepseek-v3-bf16/config.json" --layer 3 --synthetic-weights=1
one deepseek_T256 256 moe deepseek-v3 "$out/deepseek-v3-bf16/config.json" --layer 3 --synthetic-weights=1
one deepseek_T4096 4096 moe deepseek-v3 "$out/deepseek-v3-bf16/config.json" --layer 3 --synthetic-weights=1
one gptoss_T16 16 moe gpt-oss-20b "$out/gpt-oss-20b-bf16/config.json" --layer 0 --synthetic-weights=1
one gptoss_T4096 4096 moe gpt-oss-20b "$out/gpt-oss-20b-bf16/config.json" --layer 0 --synthetic-weights=1

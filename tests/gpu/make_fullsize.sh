#!/bin/sh
# make_fullsize.sh BUILD OUTDIR — prepare the full-size GPU check, here (no
# GPU): every config in models/ at full size with synthetic weights (seed 1),
# one layer of each kind, compiled to OUTDIR/<case>.moeb (--max-tokens=4096;
# a fourth column adds compile flags: gpt2_tf32, bert_tf32 are the f32 models
# with --precision=tf32, the tf32 tensor-core GEMMs at every tile size),
# and reference rows computed by the interpreter with tests/gpu/fullsize ref
# (OUTDIR/<case>/uniform and, for routed blocks, OUTDIR/<case>/skewed: a few
# dozen rows each, repeated to every T on the device by `moert test --tile`).
# BUILD is the build folder (tools/moec, tests/gpu/fullsize).  Writes
# OUTDIR/list.txt ("<case> <model> <layer>" per line) for gpu_fullsize.sh.
# A block whose weights do not fit this host's memory gets a bundle but no
# reference (fullsize says SKIP; the device run lists it as such).
# A model spelled NAME@bf16 is NAME's config without its quantization_config
# (the bf16 block of a quantised checkpoint: DeepSeek-V3's FP8 layer is
# checked both ways; the interpreter dequantises its FP8 expert rows as it
# reads them, ir_eval_defers); NAME@fbgemm is a bf16 Llama-4 config as its
# FP8 release (fbgemm_config.py: models/ holds the bf16 release's file).
# ONLY="olmoe gpt2" prepares those cases alone; ROWS=16 writes 16 rows per
# set instead of 48 (a smaller folder to carry: rows x hidden x 2 bytes each).  Exit 0 all prepared, 1 a
# compile or a reference failed.
set -u
build=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
moec=$build/tools/moec ref=$build/tests/gpu/fullsize
mkdir -p "$out" || exit 1
: > "$out/list.txt"
fail=0
# case model layer: MoE and dense layers of each family; gpt-oss's sliding
# and full-attention layers build the same FFN block (only weight names
# differ), so one of them is enough.  arctic is a two-input block (x and
# layer_in: the residual MLP beside the MoE): its sets hold input_0 and
# input_1.  Session 29 added the 2026 configs of models/ not covered:
# gemma4's parallel dense + MoE block (its router normalises x itself, so
# uniform rows only), nemotron_h's relu^2 experts, minimax_m2 in FP8 as
# published, ERNIE's softmax with a selection bias, Ling's groups, GLM-4.7's
# lite MoE, LFM2, Granite-4.0-H, Qwen3.5 (512 experts, top 10).  Session 31:
# Kimi-K2.5 (int4 compressed-tensors, 384 experts of 7168 x 2048), GLM-5.3
# (256 experts, hidden 6144) and Llama-4-Maverick as its FP8 release
# (fbgemm_fp8, 128 experts of 5120 x 8192, top-1).
cases="mixtral mixtral-8x7b 0
qwen3_moe qwen3-30b-a3b 0
qwen2_moe qwen1.5-moe-a2.7b 0
olmoe olmoe-1b-7b-0924 0
dsv2lite_dense deepseek-v2-lite 0
dsv2lite_moe deepseek-v2-lite 1
dsv3_dense deepseek-v3 0
dsv3_moe deepseek-v3 3
dsv3_moe_bf16 deepseek-v3@bf16 3
gpt_oss gpt-oss-20b 0
llama3 meta-llama-3-8b 0
mistral mistral-7b-v0.1 0
gpt2 gpt2 0
bert bert-base-uncased 0
arctic snowflake-arctic-instruct 0
glm45air glm-4.5-air 1
llama4_scout llama-4-scout-17b-16e-instruct 0
qwen3_next qwen3-next-80b-a3b-instruct 0
phimoe phi-3.5-moe-instruct 0
gemma4 gemma-4-26b-a4b-it 0
nemotron_h nemotron-3-nano-30b-a3b 1
minimax_m2_fp8 minimax-m2 0
ernie45 ernie-4.5-21b-a3b-pt 1
ling_mini ling-mini-2.0 1
glm47flash glm-4.7-flash 1
lfm2_moe lfm2-8b-a1b 2
granite4h granite-4.0-h-tiny 0
qwen35 qwen3.5-397b-a17b 0
kimi_k25 kimi-k2.5 1
glm53 glm-5.3 3
maverick_fp8 llama-4-maverick-17b-128e-instruct@fbgemm 1
mimo_v2_fp8 mimo-v2-flash 1
jamba ai21-jamba-mini-1.7 1
dbrx dbrx-instruct 0
minimax01 minimax-text-01-hf 0
kimi_k2_fp8 kimi-k2-instruct 1
step35 step-3.5-flash 3
hunyuan hunyuan-a13b-instruct 0
glm45 glm-4.5 3
qwen3_235b qwen3-235b-a22b 0
gpt2_tf32 gpt2 0 --precision=tf32
bert_tf32 bert-base-uncased 0 --precision=tf32"
echo "$cases" | while read -r name model layer flags; do
	case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac	# ONLY="a b": those cases
	t0=$(date +%s)
	dir=$src/models/$model
	case $model in *@*)	# a derived config: @bf16 without quantization_config, @fbgemm the FP8 release's
		tool=$src/bench/bf16_config.py
		case $model in *@fbgemm) tool=$src/tests/gpu/fbgemm_config.py ;; esac
		dir=$out/${model%@*}-${model#*@}
		mkdir -p "$dir" &&
		python3 "$tool" "$src/models/${model%@*}/config.json" "$dir/config.json" || exit 1
	esac
	# shellcheck disable=SC2086
	if ! "$moec" compile "$dir" --layer "$layer" --synthetic-weights=1 \
		--max-tokens=4096 $flags -o "$out/$name.moeb" 2>"$out/$name.log"; then
		echo "FAIL $name: does not compile"; tail -5 "$out/$name.log"
		echo fail >> "$out/failed"
		continue
	fi
	rm -rf "$out/$name"
	"$ref" ref "$dir" "$layer" "$out/$name" "${ROWS:-48}" > "$out/$name.ref.log" 2>&1
	rc=$?
	if [ $rc = 77 ]; then
		echo "skip $name: $(cat "$out/$name.ref.log")"
	elif [ $rc != 0 ]; then
		echo "FAIL $name: no reference"; tail -5 "$out/$name.ref.log"
		echo fail >> "$out/failed"
		continue
	else
		echo "ok   $name ($(wc -c < "$out/$name.moeb") bytes, $(($(date +%s) - t0)) s): $(tr '\n' ' ' < "$out/$name.ref.log")"
	fi
	echo "$name $model $layer" >> "$out/list.txt"
done
[ -f "$out/failed" ] && { rm -f "$out/failed"; fail=1; }
rm -f "$out"/*.log
echo "carried folder: $(du -sh "$out" | cut -f1)"
exit $fail

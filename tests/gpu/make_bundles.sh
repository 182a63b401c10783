#!/bin/sh
# make_bundles.sh MOEC OUTDIR [MOERT] — compile every fixture (ONNX exports,
# config families and quantised checkpoints, layer 1) into OUTDIR/<name>.moeb, twice, and check the
# two are byte-identical (bundles are reproducible), and write the
# interpreter's outputs for each fixture's inputs as OUTDIR/<name>.ref (test
# sets made by `moec run --compiled --test-data`: the fused graph the kernels
# implement, with the compiler's own bf16 roundings such as fuse-norm's).  Writes OUTDIR/list.txt:
# "<name>.moeb <fixture folder> <name>.ref" per line, for gpu_fixtures.sh.  With MOERT,
# each bundle must also pass `moert verify` (structure and checksums).
# The ws_* bundles are compiled for sm_90a alone (the warp-specialised GEMM
# mainloop); they load only on compute capability 9.0.
# ONLY=REGEX (environment): only the bundles whose name matches (grep -E).
# Exit 0 all compiled, 1 a compile failed or a bundle differs.
set -u
moec=$1 out=$2 moert=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" || exit 1
: > "$out/list.txt"
fail=0
arch=	# compile flags only (moec run takes no --arch)
maxt=64	# --max-tokens
one() {	# one NAME DIR [flags...]
	name=$1 dir=$2
	shift 2
	if [ -n "${ONLY:-}" ] && ! echo "$name" | grep -Eq "$ONLY"; then
		return
	fi
	# shellcheck disable=SC2086
	if ! "$moec" compile "$dir" "$@" $arch --max-tokens=$maxt -o "$out/$name.moeb" 2>"$out/$name.log"; then
		echo "FAIL $name: does not compile"; sed 's/^/     /' "$out/$name.log" | tail -5
		fail=1
		return
	fi
	# shellcheck disable=SC2086
	"$moec" compile "$dir" "$@" $arch --max-tokens=$maxt -o "$out/$name.again.moeb" 2>/dev/null
	if ! cmp -s "$out/$name.moeb" "$out/$name.again.moeb"; then
		echo "FAIL $name: two compiles differ"
		fail=1
	elif [ -n "$moert" ] && ! "$moert" verify "$out/$name.moeb" >/dev/null 2>&1; then
		echo "FAIL $name: moert verify refuses it"
		fail=1
	else
		echo "ok   $name ($(wc -c < "$out/$name.moeb") bytes)"
	fi
	rm -f "$out/$name.again.moeb"
	rm -rf "$out/$name.ref"
	mkdir -p "$out/$name.ref"
	runargs=	# a tuning table is a compile flag: the interpreter's graph does not depend on it
	for a; do case $a in --tuning=*) ;; *) runargs="$runargs $a" ;; esac; done
	for set in "$dir"/test_data_set_*/; do
		[ -d "$set" ] || continue	# no test sets: the pattern itself
		set=${set%/}
		# shellcheck disable=SC2086
		if ! "$moec" run "$dir" $runargs --compiled --test-data="$set" -o "$out/$name.ref/${set##*/}" \
			>/dev/null 2>>"$out/$name.log"; then
			echo "FAIL $name: the interpreter does not run ${set##*/}"
			fail=1
		fi
	done
	echo "$name.moeb ${dir#"$src"/} $name.ref" >> "$out/list.txt"
}
for d in "$src"/tests/fixtures/onnx/*/; do
	one "onnx_$(basename "$d")" "${d%/}"
done
for d in "$src"/tests/fixtures/hf/*/ "$src"/tests/fixtures/quant/*/; do
	case $d in */quant/*) pre=quant ;; *) pre=hf ;; esac
	one "${pre}_$(basename "$d")" "${d%/}" --layer 1
done
# arctic's dense layer 0 (its sets in layer0/, the checkpoint one folder up)
one hf_arctic_layer0 "$src/tests/fixtures/hf/arctic/layer0" --layer 0 \
	--weights "$src/tests/fixtures/hf/arctic/model.safetensors"
# sm_90a alone: GEMMs whose tiles suit it take the warp-specialised mainloop
# (TMA, mbarriers, tensormap lines encoded by the runtime; docs/codegen.md)
arch=--arch=sm_90a
for n in llama mistral deepseek_v2 qwen2_moe; do
	one "ws_hf_$n" "$src/tests/fixtures/hf/$n" --layer 1
done
# DeepSeek-V3's FP8 block with 128x128 blocks (synthetic weights): the FP8 x FP8
# GEMMs and the norm's kernel quantising its rows per 128 columns (fuse-act-quant)
one ws_fp8_deepseek_v3_128 "$src/tests/codegen/fp8/deepseek_v3_128" --layer 1 --synthetic-weights=7
# direct quantised B (--debug=bq-direct: the decode GEMMs load the packed
# words straight into registers, ld.global.nc; docs/codegen.md): MXFP4 and
# GPTQ int4 MoE blocks whose K takes a direct tile (the quant fixtures' K =
# 64 does not), with the default plan (B staged) beside them
for n in gpt_oss_256 mixtral_gptq_256; do
	one "qdirect_$n" "$src/tests/codegen/quant/$n" --layer 1 --synthetic-weights=7 --debug=bq-direct
	one "qstaged_$n" "$src/tests/codegen/quant/$n" --layer 1 --synthetic-weights=7
done
# stream-K runs for grouped quantised decode GEMMs (program.c's bq_stream
# takes them by default where an expert has one row tile, max_tokens 16, and
# N takes 192 or 256 columns; the quant fixtures' N of 32 and 64 take them
# through qstream.tuning; their sets have T = 7): MXFP4 and AWQ MoE blocks
arch=--arch=sm_90a maxt=16
for n in gpt_oss_mxfp4 qwen3_moe_awq; do
	one "qstream_$n" "$src/tests/fixtures/quant/$n" --layer 1 --tuning="$src/tests/gpu/qstream.tuning"
done
exit $fail

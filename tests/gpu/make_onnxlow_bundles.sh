#!/bin/sh
# make_onnxlow_bundles.sh MOEC OUTDIR — the bundles of issue 11's compile
# side, for gpu_fixtures.sh OUTDIR on a GPU machine (plain and --graph runs,
# against the exporters' references and the interpreter's):
#  - static-shape fixtures (tests/codegen/static): no T anywhere, run without --tokens;
#  - --precision=tf32, bf16 and f16 (f32 GEMMs on tensor cores; moert test reads
#    the manifest's precision line and loosens the tolerance to match);
#  - MoE exports with fuse-moe left out (bound-dyn: nonzero bounded, counts on
#    the device) and the hand-written nonzero -> matmul -> scatter graph.
# Writes OUTDIR/list.txt as make_bundles.sh does.  Exit 1 if one does not compile.
set -u
moec=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
nofuse=fold,canon,cse,dce,lower-moe,fuse-norm,flatten-tokens,bound-dyn,fold,canon,cse,dce,fuse-gemm,fuse-ew,dce
mkdir -p "$out" || exit 1
: > "$out/list.txt"
fail=0
one() {	# one NAME DIR MODEL [compile flags...]
	name=$1 dir=$2 model=$3
	shift 3
	if ! "$moec" compile "$model" "$@" --max-tokens=64 -o "$out/$name.moeb" 2>"$out/$name.log"; then
		echo "FAIL $name: does not compile"; tail -3 "$out/$name.log"; fail=1; return
	fi
	rm -rf "$out/$name.ref"; mkdir -p "$out/$name.ref"
	for set in "$dir"/test_data_set_*/; do
		set=${set%/}
		"$moec" run "$model" --test-data="$set" -o "$out/$name.ref/${set##*/}" >/dev/null 2>>"$out/$name.log" ||
			{ echo "FAIL $name: the interpreter does not run ${set##*/}"; fail=1; }
	done
	echo "ok   $name"
	echo "$name.moeb ${dir#"$src"/} $name.ref" >> "$out/list.txt"
}
for f in mixtral_moe llama_mlp qwen2_moe_dynamo; do
	d=$src/tests/codegen/static/$f
	one "static_$f" "$d" "$d"
	one "static_bf16_$f" "$d" "$d" --precision=bf16
	one "static_tf32_$f" "$d" "$d" --precision=tf32
done
for f in mixtral_moe llama_mlp gpt_oss_moe; do
	d=$src/tests/fixtures/onnx/$f
	one "tf32_$f" "$d" "$d" --precision=tf32
	one "bf16_$f" "$d" "$d" --precision=bf16
	one "f16_$f" "$d" "$d" --precision=f16
done
for f in mixtral_moe olmoe_moe qwen2_moe qwen3_moe deepseek_v3_moe gpt_oss_moe; do
	d=$src/tests/fixtures/onnx/$f
	one "bounded_$f" "$d" "$d" --passes=$nofuse
done
d=$src/tests/codegen-data/nonzero_scatter
one bounded_nonzero_scatter "$d" "$d/model.ir"
# graphs moec compile once refused (codegen-data/gen_regress.py)
for d in "$src"/tests/codegen-data/regress_*/; do
	d=${d%/}
	one "$(basename "$d")" "$d" "$d/model.ir"
done
# one symbolic token dim ([2, seq, H]: rows = 2T), f32 and tf32
for f in mixtral_tf446 qwen2_moe_tf457 phimoe_tf5; do
	d=$src/tests/codegen/onesym/$f
	one "onesym_$f" "$d" "$d"
	one "onesym_tf32_$f" "$d" "$d" --precision=tf32
done
# onnxruntime's MoE with use_sparse_mixer=1 (PhiMoE's router), f32 and tf32
d=$src/tests/onnx/cases/ms_moe_sparse_mixer
one ms_moe_sparse_mixer "$d" "$d"
one tf32_ms_moe_sparse_mixer "$d" "$d" --precision=tf32
exit $fail

#!/bin/sh
# run_quant.sh MOEC MOERT OUT — the mixed-input GEMMs (quantised weights
# dequantised in registers, docs/codegen.md) on the GPU.
#
#   1. correctness: the check_*.ir graphs (the contract form: dequantize of a
#      quantised weight feeding a matmul or the moe's experts) compiled and run
#      by moert test against the interpreter's outputs (moec run), at 37 tokens
#      and tiled to 1, 16 and 4096;
#   2. speed: moert bench at T=16 (decode) of the full-size graphs and their
#      bf16 baselines, plain and as a CUDA graph.  The bench line's GB/s is over
#      the bundle's bytes (the packed weights for the quantised graphs).
#
# Synthetic weights: the quantised ones are generated on the device at load,
# in the kernels' layout (the bundle holds seed and layout: mixtral_int4 is
# 0.4 MB).  Exit: 0 all passed, 1 a check failed, 2 a preparation step failed.
set -u
moec=$1 moert=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 2
rc=0

# input_0.pb: x, bf16 [T,H], N(0,1) (seed 7)
make_input() {	# DIR T H
	python3 "$here/../../tests/gpu/bf16_input.py" "$1" "$2" "$3" 7 || exit 2
}

for name in check_w4a16:128 check_w8a16_f8:128 check_moe_int4_f8:64; do
	ir=${name%%:*} H=${name##*:}
	make_input "$out/$ir/in" 37 "$H"
	mkdir -p "$out/$ir/ref" || exit 2
	"$moec" run "$here/$ir.ir" --test-data="$out/$ir/in" -o "$out/$ir/ref/test_data_set_0" >/dev/null || exit 2
	"$moec" compile "$here/$ir.ir" -o "$out/$ir.moeb" --fusion-report >"$out/$ir.report" 2>&1 || exit 2
	echo "== $ir"
	"$moert" test "$out/$ir.moeb" "$out/$ir/ref" --tile=1,16,37,4096 || rc=1
done

for ir in dense_w4a16 dense_bf16 dense_w8a16_f8 mixtral_int4 mixtral_bf16; do
	"$moec" compile "$here/$ir.ir" -o "$out/$ir.moeb" --max-tokens=16 --fusion-report \
		>"$out/$ir.report" 2>&1 || exit 2
	echo "== $ir (T=16)"
	"$moert" bench "$out/$ir.moeb" --tokens=16 --iters=200 || rc=1
	"$moert" bench "$out/$ir.moeb" --tokens=16 --iters=200 --graph || rc=1
	rm -f "$out/$ir.moeb"
done
exit $rc

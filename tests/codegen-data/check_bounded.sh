#!/bin/sh
# Unrecognised MoE graphs compile to bundles (passes/bound_dyn.c): the
# hand-written nonzero -> gather -> matmul -> scatter graph, and the
# TorchScript Mixtral export with fuse-moe left out of the pipeline.
# Kernels are assembled by ptxas when it is installed (moec compile runs
# it); moert verify accepts the bundles; the fusion report names every
# nonzero it bounded.
#	check_bounded.sh MOEC MOERT TESTS_DIR
set -e
moec=$1
moert=$2
src=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
nofuse=fold,canon,cse,dce,lower-moe,fuse-norm,flatten-tokens,bound-dyn,fold,canon,cse,dce,fuse-gemm,fuse-ew,dce

"$moec" compile "$src/codegen-data/nonzero_scatter/model.ir" --fusion-report -o "$t/nz.moeb" >"$t/nz.rep" 2>&1 ||
	{ cat "$t/nz.rep"; fail "nonzero_scatter does not compile"; }
"$moert" verify "$t/nz.moeb" >/dev/null || fail "nonzero_scatter: moert verify"
grep -q "nonzero %nz not fused: bounded by T entries, the count stays on the device" "$t/nz.rep" ||
	fail "nonzero_scatter: the report does not name the nonzero"

"$moec" compile "$src/fixtures/onnx/mixtral_moe" --passes=$nofuse --fusion-report -o "$t/mx.moeb" \
	>"$t/mx.rep" 2>&1 || { tail "$t/mx.rep"; fail "mixtral_moe without fuse-moe does not compile"; }
"$moert" verify "$t/mx.moeb" >/dev/null || fail "mixtral_moe without fuse-moe: moert verify"
n=$(grep -c "nonzero %experts.NonZero.* not fused: bounded by" "$t/mx.rep")
[ "$n" = 9 ] || fail "mixtral_moe: $n nonzero bounded, want 9 (the hit list and 8 slots)"
"$moec" compile "$src/fixtures/onnx/mixtral_moe" --passes=$nofuse --emit=ptx --arch=sm_90a -o "$t/mx.ptx" 2>/dev/null
grep -q "\.visible \.entry" "$t/mx.ptx" || fail "no PTX"
echo ok

#!/bin/sh
# check.sh MOEC DIR [N]: DeepSeek-V3's FP8 block (DIR: a config with 128x128
# weight blocks, synthetic weights) compiled for sm_90a runs its three expert
# GEMMs and the shared expert's down GEMM as FP8 x FP8 (e4m3 activations
# and weights: the fusion report's "FP8 x FP8" lines, the kernels' e4m3
# wgmma in the PTX), and for sm_90a,sm_80 none (sm_80 has no FP8 wgmma: the
# mixed-input GEMMs, and the report says why); the down GEMMs on the
# warp-specialised TMA mainloop.  N (default 3): the FP8 x FP8 GEMMs wanted
# (DeepSeek's 4: its shared gate|up too, FP8_GLU_DEFAULT; a per-channel
# checkpoint's, through fp8-regroup; --debug=fp8-per-token then none).
# FLAGS (environment): more options for the sm_90a compiles (--debug=fp8-glu:
# a per-channel shared expert's gate|up too).  Exit 0 when all hold.
moec=$1 dir=$2 want=${3:-3}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $dir: $*"; exit 1; }
# shellcheck disable=SC2086
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a -q ${FLAGS:-} \
	--emit=ptx -o "$tmp/a.ptx" --fusion-report >"$tmp/a.txt" || fail "compile for sm_90a"
n=$(grep -c "FP8 x FP8, the e4m3" "$tmp/a.txt")
[ "$n" = "$want" ] || fail "sm_90a: $n FP8 x FP8 GEMMs, want $want"
grep -q "wgmma.mma_async.sync.aligned.m64n.*k32.f32.e4m3.e4m3" "$tmp/a.ptx" || fail "no e4m3 wgmma in the PTX"
# the down GEMMs (A not gathered) on the warp-specialised mainloop: TMA boxes of e4m3
grep -q "cp.async.bulk.tensor" "$tmp/a.ptx" || fail "no FP8 GEMM on the warp-specialised (TMA) mainloop"
# shellcheck disable=SC2086
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a,sm_80 -q ${FLAGS:-} \
	--emit=ir -o "$tmp/b.ir" --fusion-report >"$tmp/b.txt" || fail "compile for sm_90a,sm_80"
grep -q "A = dequantize" "$tmp/b.txt" && fail "sm_90a,sm_80: an FP8 x FP8 GEMM"
grep -q "a target without FP8 x FP8 wgmma" "$tmp/b.txt" || fail "sm_90a,sm_80: the report does not say why"
if grep -q "fp8-regroup" "$tmp/a.txt"; then
	"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a -q --debug=fp8-per-token \
		--emit=ir -o "$tmp/c.ir" --fusion-report >"$tmp/c.txt" || fail "compile with fp8-per-token"
	grep -q "FP8 x FP8, the e4m3" "$tmp/c.txt" && fail "--debug=fp8-per-token: an FP8 x FP8 GEMM"
	grep -q "not regrouped per token and 128 columns: --debug=fp8-per-token" "$tmp/c.txt" ||
		fail "--debug=fp8-per-token: the report does not say why"
fi
echo "ok $dir: $want FP8 x FP8 GEMMs on sm_90a, none with sm_80"

#!/bin/sh
# The warp-specialised sm_90a GEMMs in a default bundle (--arch=sm_90a,sm_80):
# sm_90a's kernels are its own (NAME_ws, target=sm_90a, tensor-map
# parameters) with launch lines of their own (arch=sm_90a), sm_80 keeps its
# mma.sync kernels under the plain names; the bundle is reproducible, a
# whole-model bundle merges them, moert verify accepts both, and the same
# GEMMs on the emulator standing for sm_90a's WS path match the reference;
# the MoE up-projection (gathered A rows) takes the WS path too.
#	ws_plan.sh MOEC MOERT TESTS_DIR
set -e
moec=$1
moert=$2
src=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
fx="$src/fixtures/hf/llama"

for i in 1 2; do
	"$moec" compile "$fx" --layer 1 -q --debug=manifest -o "$t/b$i.moeb" 2>"$t/m$i" ||
		fail "the default-target bundle does not compile"
done
cmp -s "$t/b1.moeb" "$t/b2.moeb" || fail "two compiles differ"
"$moert" verify "$t/b1.moeb" >/dev/null || fail "moert verify"
m="$t/m1"
# both GEMMs, prefill and decode: a WS kernel on sm_90a, an mma.sync one on sm_80
for k in k0 k0_decode k1 k1_decode; do
	grep -q "^kernel llama_layer1_${k}_ws target=sm_90a params=ptr,ptr,ptr,ptr,tmap,tmap,i32 " "$m" ||
		fail "no sm_90a WS kernel ${k}_ws"
	grep -q "^kernel llama_layer1_${k} target=sm_80 params=ptr,ptr,ptr,ptr,i32 " "$m" ||
		fail "no sm_80 kernel $k"
	grep -q "^launch llama_layer1_${k}_ws .*args=.*tmap:tmap[0-9]*,tmap:tmap[0-9]*,T .*arch=sm_90a$" "$m" ||
		fail "no sm_90a launch line of ${k}_ws with its tensor maps"
	grep -q "^launch llama_layer1_${k} .*arch=sm_80$" "$m" || fail "no sm_80 launch line of $k"
done
# the WS launches run 4 more warps (the producer warpgroup) than the consumers
grep -q "^launch llama_layer1_k1_ws .*block=384,1,1 .*tokens=65..4096 arch=sm_90a$" "$m" ||
	fail "k1_ws: not two consumer warpgroups and a producer"
[ "$(grep -c '^tensormap ' "$m")" = 8 ] || fail "not 8 tensormap lines (A and B of four kernels)"
# a kernel on every target keeps one line for both
grep -q "^kernel llama_layer1_k2_norm target=sm_90a,sm_80 " "$m" || fail "the norm kernel is not on both targets"

# sm_90a alone: one name, as before
"$moec" compile "$fx" --layer 1 -q --arch=sm_90a --debug=manifest -o "$t/a.moeb" 2>"$t/ma" ||
	fail "the sm_90a bundle does not compile"
grep -q "^kernel llama_layer1_k0 target=sm_90a params=ptr,ptr,ptr,ptr,tmap,tmap,i32 " "$t/ma" ||
	fail "sm_90a alone: its WS kernel renamed"
! grep -q "_ws " "$t/ma" || fail "sm_90a alone: a _ws name"

# every layer into one bundle: the per-target kernels merge per target
"$moec" compile "$fx" --layers=all -q -o "$t/all.moeb" || fail "--layers=all does not compile"
"$moert" verify "$t/all.moeb" >/dev/null || fail "moert verify of the whole-model bundle"

# gathered A (the MoE up-projection reads x's rows through the permutation):
# WS with cp.async for A, so B's tensor map alone
mx="$src/fixtures/hf/mixtral"
# by default the gathered GEMM stays on the cp.async wgmma mainloop (WS with
# gathered A measured slower on the H200); --debug=ws-gather asks for it
"$moec" compile "$mx" --layer 1 -q --debug=manifest -o "$t/mx0.moeb" 2>"$t/mm0" || fail "mixtral does not compile"
grep -q "^kernel mixtral_layer1_k3_ws " "$t/mm0" && fail "mixtral: the gathered up-projection takes WS by default"
grep -q "^kernel mixtral_layer1_k3 target=sm_90a,sm_80 " "$t/mm0" ||
	fail "mixtral: by default the up-projection is not one kernel on both targets"
"$moec" compile "$mx" --layer 1 -q --debug=manifest,ws-gather -o "$t/mx.moeb" 2>"$t/mm" || fail "mixtral does not compile"
"$moert" verify "$t/mx.moeb" >/dev/null || fail "moert verify of mixtral"
grep -q "^kernel mixtral_layer1_k3_ws target=sm_90a params=ptr,ptr,ptr,ptr,ptr,ptr,tmap,i32 " "$t/mm" ||
	fail "mixtral: the gathered up-projection is not a WS kernel on sm_90a"
grep -q "^tensormap tmap0 of=w:t[0-9]* dtype=bf16 dims=64,32,8 " "$t/mm" || fail "mixtral: no B map over the experts"
grep -q "^launch mixtral_layer1_k3 .*arch=sm_80$" "$t/mm" || fail "mixtral: no sm_80 up-projection"
"$moec" test --compiled --emulate --debug=emu-wgmma,emu-ws,ws-gather --layer 1 "$mx" >"$t/emx" 2>&1 ||
	{ cat "$t/emx"; fail "mixtral: emulated WS path (gathered A)"; }
"$moec" compile "$mx" --layer 1 -q --arch=emu --emit=llvm --debug=emu-wgmma,emu-ws,ws-gather -o "$t/mx.ll" ||
	fail "mixtral: no emulator module"
grep -q moec_emu_cp_mbar_arrive "$t/mx.ll" || fail "mixtral: the emulated up-projection does not gather by cp.async"
# --debug=tma-gather: the same kernel with A's rows by one-row TMA boxes: a map over x (its T rows) first
"$moec" compile "$mx" --layer 1 -q --debug=manifest,ws-gather,tma-gather -o "$t/mxt.moeb" 2>"$t/mt" ||
	fail "mixtral (tma-gather) does not compile"
"$moert" verify "$t/mxt.moeb" >/dev/null || fail "moert verify of mixtral (tma-gather)"
grep -q "^kernel mixtral_layer1_k3_ws target=sm_90a params=ptr,ptr,ptr,ptr,ptr,ptr,tmap,tmap,i32 " "$t/mt" ||
	fail "mixtral (tma-gather): the gathered up-projection has no A map"
grep -q "^tensormap tmap0 of=in:0 dtype=bf16 dims=64,cdiv(2\*T,2) strides=128 box=64,1 swizzle=128$" "$t/mt" ||
	fail "mixtral (tma-gather): no one-row map over x"
"$moec" test --compiled --emulate --debug=emu-wgmma,emu-ws,ws-gather,tma-gather --layer 1 "$mx" >"$t/emt" 2>&1 ||
	{ cat "$t/emt"; fail "mixtral: emulated WS path (gathered A by one-row boxes)"; }
"$moec" compile "$mx" --layer 1 -q --arch=emu --emit=llvm --debug=emu-wgmma,emu-ws,ws-gather,tma-gather -o "$t/mxt.ll" ||
	fail "mixtral (tma-gather): no emulator module"
grep -q moec_emu_tma_load "$t/mxt.ll" && ! grep -q moec_emu_cp_mbar_arrive "$t/mxt.ll" ||
	fail "mixtral (tma-gather): the emulated up-projection still gathers by cp.async"

# the same GEMMs on the emulator standing for sm_90a's warp-specialised path
"$moec" test --compiled --emulate --debug=emu-wgmma,emu-ws --layer 1 "$fx" >"$t/emu" 2>&1 ||
	{ cat "$t/emu"; fail "emulated WS path"; }
grep -q "2 passed, 0 failed" "$t/emu" || { cat "$t/emu"; fail "emulated WS path: not 2 passed"; }
echo ok

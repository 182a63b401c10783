#!/bin/sh
# cluster_fake.sh MOEC MOERT LIBFAKECUDA SRC — kernels of thread-block
# clusters through the bundle and the runtime, on the stand-in driver
# (fakecuda.c): a tuning table's .c2b entry makes the dense up-projection's
# prefill kernel a cluster kernel (its kernel line's cluster=2), and moert
# launches it with cuLaunchKernelEx, cluster (2, 1, 1), over 132 CTAs; the
# other launches keep cuLaunchKernel.  The fake's kernels write nothing, so
# bench's output check fails: what is tested is the launch (the fake logs
# each cluster launch).  The numbers are the GPU's to check (docs/gpu.md).
# A kernel of clusters launches no more of them than the device holds at once
# (cuOccupancyMaxActiveClusters; the fake's FAKECUDA_MAX_CLUSTERS).
# Exit 0 or 1.
set -u
moec=$1 moert=$2 fake=$3 src=$4
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "cluster_fake: FAIL: $*"; exit 1; }
printf 'moec-tuning 2\nsm_90a dense.m1.n14336.k4096.bf16.bf16.nk.t257-1024 128x256x64.w2x4.s4.k1.c2b.wide\n' \
	>"$d/c2.tuning"
"$moec" compile "$src/bench/models/dense_up.ir" --arch=sm_90a --max-tokens=1024 --tuning="$d/c2.tuning" -q \
	-o "$d/c2.moeb" || fail "compile"
"$moert" verify "$d/c2.moeb" >/dev/null || fail "moert verify"
for T in 600 100; do
	MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_CLUSTER_LOG=$d/log.$T \
		"$moert" bench "$d/c2.moeb" --tokens=$T --iters=1 --warmup=0 >"$d/out.$T" 2>&1
	grep -q "never written" "$d/out.$T" || fail "T=$T: $(cat "$d/out.$T")"
done
grep -qx "dense_up_k0 132 2" "$d/log.600" || fail "T=600: no cluster launch of dense_up_k0: $(cat "$d/log.600" 2>&1)"
grep -vqx "dense_up_k0 132 2" "$d/log.600" && fail "T=600: other cluster launches: $(cat "$d/log.600")"
[ ! -s "$d/log.100" ] || fail "T=100 (no cluster kernel): $(cat "$d/log.100")"
# --debug=dense-c4: clusters of 4 over 132 CTAs, no more than the device holds at once (the fake says
# FAKECUDA_MAX_CLUSTERS of 4; a 132-SM GH100 holds 31 or 32): 124 then, and 66 clusters of 2 stay 132
"$moec" compile "$src/bench/models/dense_up.ir" --arch=sm_90a --max-tokens=4096 --debug=dense-c4 -q \
	-o "$d/c4.moeb" || fail "compile dense-c4"
for n in 31 32; do
	MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_MAX_CLUSTERS=$n FAKECUDA_CLUSTER_LOG=$d/log4.$n \
		"$moert" bench "$d/c4.moeb" --tokens=2048 --iters=1 --warmup=0 >"$d/out4.$n" 2>&1
	grep -qx "dense_up_k0 $((4 * n)) 4" "$d/log4.$n" || fail "dense-c4, $n clusters: $(cat "$d/log4.$n" 2>&1)"
done
MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_MAX_CLUSTERS=33 FAKECUDA_CLUSTER_LOG=$d/log2 \
	"$moert" bench "$d/c2.moeb" --tokens=600 --iters=1 --warmup=0 >/dev/null 2>&1
grep -qx "dense_up_k0 132 2" "$d/log2" || fail "clusters of 2 where 66 fit: $(cat "$d/log2" 2>&1)"
echo "cluster_fake: ok"

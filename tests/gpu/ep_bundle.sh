#!/bin/sh
# ep_bundle.sh BUNDLEDIR [RANKS] [BUILDDIR] — expert-parallel bundles on this
# machine's GPUs (issue 20, for the lead), from tests/gpu/make_ep_bundles.sh's
# BUNDLEDIR (compiled on the build host and carried: the device has no moec).
# Builds moert (tests/gpu/build_moert.sh) and tests/gpu/ep_bundle.c with
# plain gcc, finds libnccl.so.2 (find_nccl.sh), then for each model:
#   - moert run MODEL.ep1.moeb --ep-rank=0 --ep-size=1 (the CLI, a one-rank
#     NCCL communicator) and moert run MODEL.ref.moeb, outputs within bf16
#     tolerance (ep_bundle does the comparing);
#   - ep_bundle MODEL.epN.moeb MODEL.ref.moeb for N = 1 and every N in 2, 4, 8
#     up to RANKS (one thread per GPU, plain run and CUDA-graph run);
# RANKS defaults to every GPU nvidia-smi lists.  Exit 0 pass, 1 fail, 77 no
# GPU, driver or NCCL.
set -u
cd "$(dirname "$0")/../.." || exit 1
D=$1
N=${2:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
B=${3:-/tmp/moert-epb}
[ "${N:-0}" -ge 1 ] 2>/dev/null || { echo "SKIP no GPU"; exit 77; }
CC=${CC:-gcc}
command -v "$CC" >/dev/null 2>&1 || CC=cc
mkdir -p "$B" || exit 1
. tests/gpu/find_nccl.sh
use_nccl
tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build moert"; exit 1; }
# shellcheck disable=SC2086
$CC -std=c17 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iutil -Ibundle -Iruntime \
	-o "$B/ep_bundle" tests/gpu/ep_bundle.c util/*.c bundle/*.c runtime/*.c -ldl -lpthread -lm ||
	{ echo "FAIL build ep_bundle"; exit 1; }
bad=0
for model in qwen3_moe deepseek_v3; do
	x=$D/$model.x.pb
	echo "== $model"
	timeout 120 "$B/moert" run "$D/$model.ep1.moeb" --ep-rank=0 --ep-size=1 --input x="$x" -o "$B/$model.ep1" ||
		{ echo "FAIL moert run --ep-rank=0 --ep-size=1"; bad=1; }
	for n in 1 2 4 8; do
		[ $n -le "$N" ] || { echo "SKIP $model ep$n: $N GPUs"; continue; }
		for b in "$D/$model.ep$n.moeb" $([ $n = 2 ] && echo "$D/$model.ep2s.moeb"); do
			echo "-- $(basename "$b")"
			timeout 300 "$B/ep_bundle" "$b" "$D/$model.ref.moeb" "$x" || { echo "FAIL $b"; bad=1; }
		done
	done
done
[ $bad = 0 ] && echo "ep_bundle: all passed"
exit $bad

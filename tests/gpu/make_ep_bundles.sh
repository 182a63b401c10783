#!/bin/sh
# make_ep_bundles.sh MOEC OUTDIR — the bundles tests/gpu/ep_bundle.sh runs on
# a GPU machine (which has no moec), compiled here: for the tiny Qwen3-MoE
# and DeepSeek-V3 checkpoints, the unpartitioned block (MODEL.ref.moeb), its
# expert-parallel bundles for N = 1, 2, 4, 8 ranks (MODEL.epN.moeb, the sum
# combine; MODEL.ep2s.moeb the slots combine) and a skewed 64-token input
# (MODEL.x.pb).  Carry OUTDIR to the device.  Exit 0, or 1 if a compile fails.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
moec=$1 out=$2
mkdir -p "$out" || exit 1
for model in qwen3_moe deepseek_v3; do
	m=$src/tests/fixtures/hf/$model
	python3 "$src/tests/ep/make_input.py" "$out/$model.x.pb" 64 64 7 --skew || exit 1
	"$moec" compile "$m" --max-tokens=64 -o "$out/$model.ref.moeb" -q || exit 1
	for N in 1 2 4 8; do
		"$moec" compile "$m" --max-tokens=64 --ep=$N -o "$out/$model.ep$N.moeb" -q || exit 1
	done
	"$moec" compile "$m" --max-tokens=64 --ep=2 --ep-combine=slots -o "$out/$model.ep2s.moeb" -q || exit 1
done
ls -l "$out"

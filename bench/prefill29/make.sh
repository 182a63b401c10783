#!/bin/sh
# make.sh MAIN_MOEC OUT — the arms of the session-29 prefill A/B (bench/RESULTS.md,
# "Epilogue rows ahead, bf16 slots"), compiled here with --cubin and xz'd into OUT
# for run.sh (OUT=<dir> sh OUT/run.sh on the GPU machine, from main's checkout root).
set -eu
main=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
moec=$src/build/tools/moec
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C='qwen3_T4096|gptoss_T4096|mixtral_T4096'
W=$src/bench/prefill29/wide.tuning
arm() {	# arm NAME MOEC CASES FLAGS
	ONLY=$3 MOEC_FLAGS="--cubin $4" sh "$src/bench/make_bench.sh" "$2" "$tmp/$1" >/dev/null
}
arm main "$main" "$C" ""
arm ra "$moec" "$C" ""
arm sx "$moec" "$C" "--debug=slots-x"
arm sxw "$moec" "$C" "--debug=slots-x --tuning=$W"
arm sxp "$moec" 'qwen3_T4096|mixtral_T4096' "--debug=slots-x,ws-pingpong"
arm sxpw "$moec" qwen3_T4096 "--debug=slots-x,ws-pingpong --tuning=$W"
mkdir -p "$out"
for f in "$tmp"/*/*.moeb; do
	a=$(basename "$(dirname "$f")")
	xz -9e -T1 -c "$f" >"$out/$a.$(basename "$f").xz"
done
cp "$src/bench/prefill29/run.sh" "$out/run.sh"

#!/bin/sh
# prefill_ab.sh here|device MOEC|BUNDLEDIR OUTDIR — the A/B of the session-25
# prefill plan choices (docs/codegen.md, "Prefill at T = 4096"), T = 4096 MoE
# layers (DeepSeek-V3 bf16, gpt-oss-20b bf16, Qwen3-30B-A3B, Mixtral).
#   here:   sh bench/prefill_ab.sh here build/tools/moec build/prefill_ab
#           compiles one bench set per arm into build/prefill_ab/ARM/
#   device: sh bench/prefill_ab.sh device build/prefill_ab $OUT/prefill_ab
#           builds moert (tests/gpu/build_moert.sh), then per arm and case
#           `moert bench --tokens=T --graph --profile` into OUTDIR/ARM.log (T:
#           the case's tokens, 4096 for the T4096 cases)
# Arms: new (the heuristic now), old (--debug=full-blocks and the tiles
# before: the plan of main before session 25), pers (the persistent schedule,
# off by default), full (every row block alone), s3 (gpt-oss gate|up 128x128,
# 3 stages, two CTAs an SM), wsg (gathered A on the warp-specialised
# mainloop), t192 (bench/tile192.tuning: DeepSeek-V3's expert GEMMs on 192-row
# tiles), t192wsg (and its gate|up on the warp-specialised mainloop), t64
# (64x256 tiles whose m-tiles share B through L2, bench/tile64.tuning).  ARMS and CASES (a grep -E pattern of
# case names) choose others than the default, here and on the device alike:
#   ARMS="new t192 t192wsg t64" CASES='deepseek_T4096|deepseek_T256' sh bench/prefill_ab.sh here ...
set -u
mode=$1 a=$2 out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
arms=${ARMS:-new old pers full s3 wsg}
cases=${CASES:-deepseek_T4096|gptoss_T4096|qwen3_T4096|mixtral_T4096}
flags() {
	case $1 in
	new) echo "" ;;
	old) echo "--debug=full-blocks --tuning=$src/bench/prefill_before.tuning" ;;
	pers) echo "--debug=persistent-prefill" ;;
	full) echo "--debug=full-blocks" ;;
	s3) echo "--tuning=$src/bench/prefill_128x128s3.tuning" ;;
	wsg) echo "--debug=ws-gather" ;;
	t192) echo "--tuning=$src/bench/tile192.tuning" ;;
	t192wsg) echo "--tuning=$src/bench/tile192.tuning --debug=ws-gather" ;;
	t64) echo "--tuning=$src/bench/tile64.tuning" ;;
	esac
}
case $mode in
here)
	for arm in $arms; do
		only=$cases
		[ "$arm" = s3 ] && only=gptoss_T4096
		ONLY=$only MOEC_FLAGS=$(flags "$arm") sh "$src/bench/make_bench.sh" "$a" "$out/$arm" >/dev/null || exit 1
		echo "ok   $arm: $(awk '{printf "%s ", $1}' "$out/$arm/cases.txt")"
	done ;;
device)
	mkdir -p "$out" || exit 1
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
	for arm in $arms; do
		[ -f "$a/$arm/cases.txt" ] || continue
		while read -r name bundle tokens _; do
			echo "--- $arm $name"
			"$tmp/moert" bench "$a/$arm/$bundle" --tokens="$tokens" --graph --profile 2>&1
		done <"$a/$arm/cases.txt" | tee "$out/$arm.log"
	done ;;
*)
	echo "usage: prefill_ab.sh here MOEC OUTDIR | device BUNDLEDIR OUTDIR" >&2
	exit 2 ;;
esac

#!/bin/sh
# dyn_ab.sh MOEC OUTDIR [MAIN_MOEC] — here: the T = 16 decode cases of
# make_bench.sh (dense_up_M16, mixtral_T16, qwen3_T16, gptoss_T16,
# deepseek_T16) compiled with dynamic stream-K to A/B on the device
# (docs/codegen.md, "Dynamic stream-K"), one make_bench.sh directory per
# arm, for bench/plan_ab.sh, and a tune-candidates directory for
# bench/tune_bench.sh (each dynamic variant checked against the plan's own
# launch on the device and timed alone):
#
#   OUTDIR/main   MAIN_MOEC's bundles (given: e.g. /work/main/build/tools/moec)
#   OUTDIR/new    MOEC's, no flags (the heuristic's plans: equal runs)
#   OUTDIR/dyn    --debug=stream-dyn: 8 units a CTA from an atomic counter
#   OUTDIR/u4     4 units a CTA (a table: every .pN -> .pN.u4)
#   OUTDIR/u16    16 units a CTA (.pN.u16)
#   OUTDIR/cand   --tune-candidates (with .u4, .u8, .u16 last, where the 48 a key leave room)
#
# On the device (~3 min):
#
#   SKEWS='0 80' ROUNDS=1 PROFILE=1 sh bench/plan_ab.sh main=OUTDIR/main dyn=OUTDIR/dyn \
#       u4=OUTDIR/u4 u16=OUTDIR/u16
#   sh bench/tune_bench.sh OUTDIR/cand $OUT/dyn-tune --tokens=5,16 --iters=20
set -eu
moec=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
only='^(dense_up_M16|mixtral_T16|qwen3_T16|gptoss_T16|deepseek_T16)$'
mkdir -p "$out"
if [ -n "${3:-}" ]; then
	ONLY=$only sh "$src/bench/make_bench.sh" "$3" "$out/main"
fi
ONLY=$only MOEC_FLAGS=-v sh "$src/bench/make_bench.sh" "$moec" "$out/new"
ONLY=$only MOEC_FLAGS=--debug=stream-dyn sh "$src/bench/make_bench.sh" "$moec" "$out/dyn"
ONLY='^(dense_up_M16|mixtral_T16|qwen3_T16)$' MOEC_FLAGS=--tune-candidates \
	sh "$src/bench/make_bench.sh" "$moec" "$out/cand"
# every stream-K variant the new arm planned, per target and key
cat "$out"/new/*.log |
	sed -n 's/.* on \(sm_[0-9a-z]*\): tuning key \([^,]*\), variant \([^ ]*\.p[0-9]*\) (heuristic).*/\1 \2 \3/p' |
	sort -u > "$out/stream.plans"
[ -s "$out/stream.plans" ] || { echo "dyn_ab.sh: no stream-K plan in $out/new/*.log" >&2; exit 1; }
for u in 4 16; do
	{
		echo "moec-tuning 2"
		echo "# dyn_ab.sh arm u$u, from $out/new's plans"
		awk -v u="$u" '{ print $1, $2, $3 ".u" u }' "$out/stream.plans"
	} > "$out/u$u.tuning"
	ONLY=$only MOEC_FLAGS=--tuning="$out/u$u.tuning" sh "$src/bench/make_bench.sh" "$moec" "$out/u$u"
	if grep -l 'warning' "$out/u$u"/*.log >/dev/null 2>&1; then
		grep -h 'warning' "$out/u$u"/*.log >&2
		exit 1
	fi
done
echo "dyn_ab.sh: arms ${3:+main }new dyn u4 u16, candidates cand, in $out"

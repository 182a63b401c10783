#!/bin/sh
# waves_ab.sh MOEC OUTDIR [MAIN_MOEC] — here: the T = 16 decode cases of
# make_bench.sh (dense_up_M16, mixtral_T16, qwen3_T16, gptoss_T16,
# deepseek_T16) compiled with the stream-K plans to A/B on the device
# (docs/codegen.md, "Stream-K in waves"), one make_bench.sh directory per
# arm, for bench/plan_ab.sh:
#
#   OUTDIR/main   MAIN_MOEC's bundles (given: e.g. /work/main/build/tools/moec)
#   OUTDIR/new    MOEC's, no flags (the heuristic's plans)
#   OUTDIR/waves  --debug=stream-waves: W runs per CTA slot, W from the model
#   OUTDIR/w4     4 runs per CTA slot everywhere (a table: every .pN -> .p4N)
#   OUTDIR/k64    16x128x128 stream-K as 16x128x64 with 5 stages: 2 CTAs, 8
#                 warps an SM (.p2N)
#   OUTDIR/w8w4   16x128x128 on 8 warps (w1x8), 4 runs per slot (.p4N)
#
# The table arms rewrite the new arm's plan (moec -v: each GEMM's key and
# variant per T bucket) into OUTDIR/ARM.tuning, so they differ from new only
# in those variants.  On the device:
#
#   SKEWS='0 80' ROUNDS=1 PROFILE=1 sh bench/plan_ab.sh main=OUTDIR/main new=OUTDIR/new \
#       waves=OUTDIR/waves w4=OUTDIR/w4 k64=OUTDIR/k64 w8w4=OUTDIR/w8w4
set -eu
moec=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
only='^(dense_up_M16|mixtral_T16|qwen3_T16|gptoss_T16|deepseek_T16)$'
mkdir -p "$out"
if [ -n "${3:-}" ]; then
	ONLY=$only sh "$src/bench/make_bench.sh" "$3" "$out/main"
fi
ONLY=$only MOEC_FLAGS=-v sh "$src/bench/make_bench.sh" "$moec" "$out/new"
ONLY=$only MOEC_FLAGS=--debug=stream-waves sh "$src/bench/make_bench.sh" "$moec" "$out/waves"
# every stream-K variant the new arm planned, per target and key
cat "$out"/new/*.log |
	sed -n 's/.* on \(sm_[0-9a-z]*\): tuning key \([^,]*\), variant \([^ ]*\.p[0-9]*\) (heuristic).*/\1 \2 \3/p' |
	sort -u > "$out/stream.plans"
[ -s "$out/stream.plans" ] || { echo "waves_ab.sh: no stream-K plan in $out/new/*.log" >&2; exit 1; }
arm() {	# arm NAME AWK-PROGRAM: the table, then the bundles
	{
		echo "moec-tuning 2"
		echo "# waves_ab.sh arm $1, from $out/new's plans"
		awk "$2" "$out/stream.plans"
	} > "$out/$1.tuning"
	ONLY=$only MOEC_FLAGS=--tuning="$out/$1.tuning" sh "$src/bench/make_bench.sh" "$moec" "$out/$1"
}
# $3 is BMxBNxBK.wWMxWN.sS.kK.pN; p = N
split='{ n = split($3, f, "."); p = substr(f[n], 2) + 0; v = f[1]; for (i = 2; i < n; i++) v = v "." f[i] }'
arm w4 "$split"' { print $1, $2, v ".p" 4 * p }'
arm k64 "$split"' v == "16x128x128.w1x4.s5.k1" { print $1, $2, "16x128x64.w1x4.s5.k1.p" 2 * p }'
arm w8w4 "$split"' v == "16x128x128.w1x4.s5.k1" { print $1, $2, "16x128x128.w1x8.s5.k1.p" 4 * p }'
# every arm's variants as planned (a table entry the builder refused would
# have fallen back to the heuristic with a warning)
for a in w4 k64 w8w4; do
	if grep -l 'warning' "$out/$a"/*.log >/dev/null 2>&1; then
		grep -h 'warning' "$out/$a"/*.log >&2
		exit 1
	fi
done
echo "waves_ab.sh: arms ${3:+main }new waves w4 k64 w8w4 in $out"

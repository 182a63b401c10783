#!/bin/sh
# dense_ab.sh here|device MOEC|BUNDLEDIR — the A/B of session 27's dense
# GEMM variants (docs/codegen.md: "Clusters of 2", "256-column warpgroup
# tiles") on the dense up-projection at M = 1024 and 4096.
#   here:   sh bench/dense_ab.sh here build/tools/moec build/dense_ab
#           one bench set per arm into build/dense_ab/ARM/
#   device: sh bench/dense_ab.sh device build/dense_ab
#           outputs of every arm against main's on one input
#           (bench/same_outputs.sh: clusters are checked nowhere else), then
#           bench/plan_ab.sh over the arms (2 rounds of moert bench --graph)
# Arms: main (the default plan: tanh's division without a branch since
# session 28), divrn (--debug=div-rn: div.rn, session 27's kernels, the same
# bits), pp (ping-pong consumers in every T bucket), ppw (ping-pong on 64x256
# warpgroup tiles), pers (the cooperative tile persistent at M = 4096:
# bench/dense_pers.tuning), persw (the same on 64x256 warpgroup tiles), wide
# (--debug=wg-wide), c2 (clusters of 2 sharing B with 64x256 warpgroup tiles:
# bench/dense_c2.tuning), c2n (clusters alone: bench/dense_c2n.tuning);
# session 29: bands (tiles in bands of 8 row tiles: a tuning table's `.b8`,
# bench/dense_bands.tuning), persb (pers with bands), ppb (pp with bands of
# 16), t224 / t224p (128x224 tiles on 64x224 warpgroup tiles, tiled /
# persistent: bench/dense_t224*.tuning), t112 / t112p (256x112 tiles:
# bench/dense_t112*.tuning), gs (GELU as x sigmoid(2u): session 29's
# --debug=gelu-sigmoid, the default since session 30, so gs = main and
# gt = --debug=gelu-tanh, the tanh form), gsp / gspp / gst224p / gst112p (gs with pers, pp, t224p,
# t112p), gsppb (gspp in bands of 16), gspersw (gsp on 64x256 warpgroup
# tiles), gsbk (gs, 256x128x128 tiles, 2 stages, persistent).  MOEC_EXTRA adds flags to every arm (e.g. --cubin: no JIT on the
# device).
# ARMS chooses others (default: main divrn pers persw wide).
set -u
mode=$1 a=$2
src=$(cd "$(dirname "$0")/.." && pwd)
arms=${ARMS:-main divrn pers persw wide}
flags() {
	case $1 in
	main) echo "" ;;
	divrn) echo "--debug=div-rn" ;;
	pp) echo "--debug=ws-pingpong" ;;
	ppw) echo "--debug=ws-pingpong,wg-wide" ;;
	pers) echo "--tuning=$src/bench/dense_pers.tuning" ;;
	persw) echo "--debug=wg-wide --tuning=$src/bench/dense_pers.tuning" ;;
	wide) echo "--debug=wg-wide" ;;
	c2) echo "--tuning=$src/bench/dense_c2.tuning" ;;
	c2n) echo "--tuning=$src/bench/dense_c2n.tuning" ;;
	bands | persb | t224 | t224p | t112 | t112p) echo "--tuning=$src/bench/dense_$1.tuning" ;;
	ppb) echo "--debug=ws-pingpong --tuning=$src/bench/dense_ppb.tuning" ;;
	gs) echo "" ;;
	gt) echo "--debug=gelu-tanh" ;;
	gsp) echo "--tuning=$src/bench/dense_pers.tuning" ;;
	gspp) echo "--debug=ws-pingpong" ;;
	gst224p) echo "--tuning=$src/bench/dense_t224p.tuning" ;;
	gst112p) echo "--tuning=$src/bench/dense_t112p.tuning" ;;
	gsppb) echo "--debug=ws-pingpong --tuning=$src/bench/dense_ppb.tuning" ;;
	gspersw) echo "--debug=wg-wide --tuning=$src/bench/dense_pers.tuning" ;;
	gsbk) echo "--tuning=$src/bench/dense_bk128p.tuning" ;;
	esac
}
case $mode in
here)
	out=$3
	for arm in $arms; do
		MOEC_FLAGS="$(flags "$arm") ${MOEC_EXTRA:-}" ONLY='^dense_up_M(1024|4096)$' sh "$src/bench/make_bench.sh" "$a" "$out/$arm" ||
			exit 1
	done
	;;
device)
	set --
	for arm in $arms; do
		set -- "$@" "$arm=$a/$arm"
	done
	rc=0
	sh "$src/bench/same_outputs.sh" "$@" || rc=1
	sh "$src/bench/plan_ab.sh" "$@" || rc=1
	exit $rc
	;;
*)
	echo "usage: dense_ab.sh here MOEC OUTDIR | device BUNDLEDIR" >&2
	exit 2
	;;
esac

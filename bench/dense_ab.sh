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
# bench/dense_c2.tuning), c2n (clusters alone: bench/dense_c2n.tuning).
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
	esac
}
case $mode in
here)
	out=$3
	for arm in $arms; do
		MOEC_FLAGS=$(flags "$arm") ONLY='^dense_up_M(1024|4096)$' sh "$src/bench/make_bench.sh" "$a" "$out/$arm" ||
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

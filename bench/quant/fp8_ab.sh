#!/bin/sh
# fp8_ab.sh — one-run A/B of DeepSeek-V3's FP8 MoE layer 3 at T = 4096 on the
# H200 (issue 13; session 27's variants, docs/codegen.md "FP8 x FP8"), in two steps:
#
#   bench/quant/fp8_ab.sh prepare BUILD MAIN_BUILD OUT   here: one bundle an arm (+ reference rows)
#   bench/quant/fp8_ab.sh gpu OUT                        on the GPU machine (carry OUT)
#
# Arms (each a bundle of the same synthetic weights, seed 1; the variants are
# tuning-table spellings for the T = 1025..4096 bucket of the expert GEMMs,
# k3 = gate|up (cp.async wgmma, gathered A), k4 = down (warp-specialised,
# persistent), k6 = the shared expert's down (dense, warp-specialised)):
#   bf16    the layer without quantization_config (the ratio's reference)
#   main    MAIN_BUILD's moec, its default plan
#   new     this branch's default plan
#   (session 28: ncu of main has k3 at L2 86% and k4 at L2 83% / DRAM 72%:
#   both move 40 KB from L2 a 64x256 k-tile; clusters of 2 share a box)
#   c2a     k4 64x256 in clusters of 2 (`.c2a`: column-tile pairs, A's box
#           halved and multicast: 36 KB a CTA and k-tile instead of 40)
#   d128    k4 128x128 (two warpgroups stacked; B's tile read by 1.5 row
#           tiles an expert instead of 2.5), no cluster
#   c2a128  k4 128x128 in clusters of 2 sharing A: 24 KB a CTA and k-tile
#   c2all   c2a128, and k6 64x256 in clusters of 2 sharing B (`.c2b`)
#   new     (since session 28: the default; `cp` is --debug=f8-cp, the old
#           cp.async wgmma k3) k3 (and the shared expert's gate|up k5, bf16
#           with its output quantised) on the warp-specialised mainloop:
#           B by TMA (a rank-3 box through the gate|up interleave), A's
#           gathered rows by the producers' cp.async, consumers that meet
#           only at the ring (one's promotion under the other's wgmmas);
#           the cp.async loop spent ~40% of its stall samples issuing
#           its 10 cp.async a thread and k-tile (ncu s28 r1 fp8_k3_sass)
#   wsall   new and c2a128 (the H200, session 28: main 7098, cp 7111, new
#           6803, wsall 6957 us)
# GPU: each arm's correctness at T = 4096 against the interpreter's full-size
# rows (uniform and skewed, plain; FULL=0 at prepare leaves them out), then
# `moert bench --tokens=4096 --graph --profile` and a table: the layer (CUDA
# graph median), its ratio to bf16 (target 1.6x), the steps k3, k4 (with
# TFLOP/s; target 1100), the shared expert's gate|up k5 and down k6, and the norm.  Exit: 0 all passed, 1 a check failed,
# 2 a preparation step failed, 77 no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cmd=${1:-}
ARMS=${ARMS:-'main new cp c2a d128 c2a128 c2all wsall'}
K3=g256.m8.n4096.k7168.f8e4m3.f8e4m3.nk.t1025-4096
K4=g256.m8.n7168.k2048.f8e4m3.f8e4m3.nk.t1025-4096
K6=dense.m1.n7168.k2048.f8e4m3.f8e4m3.nk.t1025-4096

table() {	# ARM: its tuning table's lines (none: the heuristic)
	case $1 in
	c2a) echo "sm_90a $K4 64x256x128.w2x4.s4.k1.c2a.fw" ;;
	d128) echo "sm_90a $K4 128x128x128.w2x4.s5.k1.fw" ;;
	c2a128) echo "sm_90a $K4 128x128x128.w2x4.s5.k1.c2a.fw" ;;
	c2all) table c2a128; echo "sm_90a $K6 64x256x128.w2x4.s4.k1.c2b.fw" ;;
	wsall) table c2a128 ;;
	esac
}

debug() {	# ARM: its --debug flags (none: the default)
	case $1 in
	cp) echo --debug=f8-cp ;;
	esac
}

prepare() {	# BUILD MAIN_BUILD OUT
	moec=$1/tools/moec main=$2/tools/moec out=$3 cfg=$src/models/deepseek-v3/config.json
	mkdir -p "$out/bf16" || exit 2
	python3 - "$cfg" "$out/bf16/config.json" <<'PY' || exit 2
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("quantization_config", None)
c["torch_dtype"] = c["dtype"] = "bfloat16"
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
	"$moec" compile "$out/bf16/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 \
		-o "$out/bf16.moeb" >"$out/bf16.log" 2>&1 || { cat "$out/bf16.log"; exit 2; }
	for arm in $ARMS; do
		m=$moec flags=$(debug "$arm")
		[ "$arm" = main ] && m=$main
		if [ -n "$(table "$arm")" ]; then
			{ echo "moec-tuning 2"; table "$arm"; } >"$out/$arm.tuning"
			flags="$flags --tuning=$out/$arm.tuning"
		fi
		# shellcheck disable=SC2086
		"$m" compile "$cfg" --layer 3 --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 $flags \
			-o "$out/$arm.moeb" >"$out/$arm.log" 2>&1 || { cat "$out/$arm.log"; exit 2; }
		if grep -q "does not fit" "$out/$arm.log"; then cat "$out/$arm.log"; exit 2; fi
		"$moec" inspect "$out/$arm.moeb" | grep -E "^  launch deepseek_v3_layer3_k[347]" |
			grep -v decode | sed "s/^/$arm: /"
	done
	if [ "${FULL:-1}" = 1 ]; then
		rm -rf "$out/rows"
		"$1/tests/gpu/fullsize" ref "$src/models/deepseek-v3" 3 "$out/rows" 48 || exit 2
	fi
	du -sh "$out"
}

gpu() {	# OUT
	out=$1 B=${BUILD:-/tmp/moert-fp8ab} rc=0
	tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 2; }
	"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
	"$B/moert" info
	if [ -d "$out/rows" ]; then
		sets=
		for s in uniform skewed; do [ -d "$out/rows/$s" ] && sets="$sets $out/rows/$s"; done
		for arm in $ARMS; do
			echo "== correctness $arm"
			# shellcheck disable=SC2086
			"$B/moert" test "$out/$arm.moeb" $sets --tile=4096 || rc=1
		done
	fi
	"$B/moert" bench "$out/bf16.moeb" --tokens=4096 --iters=30 --graph >"$B/bf16.txt" || rc=1
	for arm in $ARMS; do
		"$B/moert" bench "$out/$arm.moeb" --tokens=4096 --iters=30 --graph --profile >"$B/$arm.txt" || rc=1
	done
	echo "== DeepSeek-V3 layer 3, T=4096 (us; CUDA graph median; steps alone)"
	printf '%-8s %9s %6s %9s %6s %9s %6s %8s %8s %8s\n' arm layer xbf16 k3 TF/s k4 TF/s k5 k6 norm
	for arm in $ARMS; do
		awk -v arm="$arm" '
			FNR == 1 { f++ }
			/^bench / { for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { split($i, v, "="); m[f] = v[2] } }
			f == 2 && $1 ~ /_k3$/ { k3 = $2 }
			f == 2 && $1 ~ /_k4$/ { k4 = $2 }
			f == 2 && $1 ~ /_k5$/ { k5 = $2 }
			f == 2 && $1 ~ /_k6$/ { k6 = $2 }
			f == 2 && $1 ~ /_k7(_norm)?$/ { k7 = $2 }
			END {
				R = 8 * 4096
				printf "%-8s %9.1f %5.2fx %9.1f %6.0f %9.1f %6.0f %8.1f %8.1f %8.1f\n", arm, m[2], m[1] / m[2],
				       k3, 2 * R * 4096 * 7168 / k3 / 1e6, k4, 2 * R * 7168 * 2048 / k4 / 1e6, k5, k6, k7
			}' "$B/bf16.txt" "$B/$arm.txt"
	done
	exit $rc
}

case $cmd in
prepare) [ $# = 4 ] || { echo "usage: fp8_ab.sh prepare BUILD MAIN_BUILD OUT" >&2; exit 2; }; prepare "$2" "$3" "$4" ;;
gpu) [ $# = 2 ] || { echo "usage: fp8_ab.sh gpu OUT" >&2; exit 2; }; cd "$src" && gpu "$2" ;;
*) echo "usage: fp8_ab.sh prepare BUILD MAIN_BUILD OUT | gpu OUT" >&2; exit 2 ;;
esac

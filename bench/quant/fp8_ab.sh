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
#   (session 29: k3 and k4 in clusters of 2 sharing B, the pairs of an
#   expert's 64-row tiles: 24 KB a CTA and k-tile from L2 where a tile
#   alone moves 40; an odd last row tile's column tiles in pairs)
#   c2      --debug=f8-c2: both expert GEMMs in the pairs
#   c2k3    the gate|up alone (`.c2b` on k3: B's interleaved half boxes)
#   c2k4    the down alone (`.c2b` on k4)
#   persk3  k3 persistent over 132 CTAs without clusters (the pairs' schedule
#           is persistent: this arm tells the two apart)
#   pf      (session 32) --debug=f8-l2pf: the FP8 WS producers prefetch B
#           into L2 a ring ahead, 4 k-tiles (512 bytes a row) at once (the
#           H200: 1.06x slower at T = 4096, 1.13x at 256; opt-in)
# Bundles carry cubins (no JIT on the device).  Correctness: with FULL=1 each
# arm against the interpreter's full-size rows (~16 min of CPU at prepare);
# with FULL=0 each arm's output y against main's on the same inputs (T = 4096,
# uniform and skewed: 80% of each token shared; a plan that only moves tiles between CTAs
# changes no bit: the same k32 steps and promotion per element, max_abs 0
# expected; the gate is rel_l2 < 1e-3, far below the O(1) of a wrong tile).
# GPU: each arm's correctness at T = 4096 against the interpreter's full-size
# rows (uniform and skewed, plain; FULL=0 at prepare leaves them out), then
# `moert bench --tokens=4096 --graph --profile` and a table: the layer (CUDA
# graph median), its ratio to bf16 (target 1.6x), the steps k3, k4 (with
# TFLOP/s; target 1100), the shared expert's gate|up k5 and down k6, and the norm.  Exit: 0 all passed, 1 a check failed,
# 2 a preparation step failed, 77 no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${SRC:-$(cd "$here/../.." && pwd)}	# SRC: the checkout whose tests/gpu builds moert
cmd=${1:-}
ARMS=${ARMS:-'main c2 c2k3 c2k4 persk3'}
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
	c2k3) echo "sm_90a $K3 64x256x128.w2x4.s5.k1.c2b.fw" ;;
	c2k4) echo "sm_90a $K4 64x256x128.w2x4.s5.k1.c2b.fw" ;;
	persk3) echo "sm_90a $K3 64x256x128.w2x4.s5.k1.pers.fw" ;;
	esac
}

debug() {	# ARM: its --debug flags (none: the default)
	case $1 in
	cp) echo --debug=f8-cp ;;
	c2) echo --debug=f8-c2 ;;
	pf) echo --debug=f8-l2pf ;;
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
	if [ "${BF16:-1}" = 1 ]; then
		"$moec" compile "$out/bf16/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
			--max-tokens=4096 --cubin -o "$out/bf16.moeb" >"$out/bf16.log" 2>&1 || { cat "$out/bf16.log"; exit 2; }
	fi
	for arm in $ARMS; do
		m=$moec flags=$(debug "$arm")
		[ "$arm" = main ] && m=$main
		if [ -n "$(table "$arm")" ]; then
			{ echo "moec-tuning 2"; table "$arm"; } >"$out/$arm.tuning"
			flags="$flags --tuning=$out/$arm.tuning"
		fi
		# shellcheck disable=SC2086
		"$m" compile "$cfg" --layer 3 --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 --cubin $flags \
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

# moert under a time limit (a hung kernel ends the call, not the batch)
mrt() {
	timeout "${LIMIT:-90}" "$B/moert" "$@"
}

# same OUT B: each arm's y against main's on the same inputs (FULL=0);
# prints a line an arm and input, "ok" or "DIFFERENT"; the arms that pass
# go to $B/good.  Exit 1 when one differs.
same() {
	out=$1 B=$2 rc=0
	python3 - "$B" <<'PY' || return 1
import sys
import numpy as np
r = np.random.default_rng(29)
np.save(sys.argv[1] + "/x4096.npy", r.uniform(-1, 1, (4096, 7168)).astype(np.float32))
c = r.uniform(-1, 1, (1, 7168))	# skewed: most of each token shared, so a few experts take most rows
np.save(sys.argv[1] + "/x4096s.npy", (0.8 * c + 0.2 * r.uniform(-1, 1, (4096, 7168))).astype(np.float32))
PY
	: >"$B/good"
	for arm in $ARMS; do
		ok=1
		for x in ${SAME_X:-x4096 x4096s}; do
			# the other arms at T = 4096 uniform only (their kernels are c2's)
			[ "$arm" = main ] || [ "$arm" = c2 ] || [ "$x" = x4096 ] || continue
			mrt run "$out/$arm.moeb" --input=x="$B/$x.npy" -o "$B/y_${arm}_$x" >/dev/null 2>"$B/err" ||
				{ echo "same $arm $x FAILED: $(head -c 300 "$B/err")"; ok=0; continue; }
			mv "$B/y_${arm}_$x/y.npy" "$B/y.$arm.$x.npy" && rm -rf "$B/y_${arm}_$x"
			[ "$arm" = main ] && continue
			python3 - "$B/y.main.$x.npy" "$B/y.$arm.$x.npy" "$arm" "$x" <<'PY' || ok=0
import sys
import numpy as np
a = np.load(sys.argv[1]).astype(np.float64)
b = np.load(sys.argv[2]).astype(np.float64)
good = a.shape == b.shape and np.isfinite(b).all()
d = np.abs(a - b) if good else np.full(1, np.inf)
rel = float(np.sqrt((d * d).sum() / max((a * a).sum(), 1e-30))) if good else float("inf")
good = good and rel < 1e-3
print("same %s %s max_abs=%.3g rel_l2=%.3g %s" % (sys.argv[3], sys.argv[4], d.max(), rel,
                                                    "ok" if good else "DIFFERENT"))
sys.exit(0 if good else 1)
PY
		done
		if [ $ok = 1 ]; then echo "$arm" >>"$B/good"; else rc=1; fi
	done
	rm -f "$B"/y.*.npy "$B"/x*.npy
	return $rc
}

gpu() {	# OUT
	out=$1 B=${BUILD:-/tmp/moert-fp8ab} rc=0
	tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 2; }
	"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
	"$B/moert" info
	good=$ARMS
	if [ -d "$out/rows" ]; then
		sets=
		for s in uniform skewed; do [ -d "$out/rows/$s" ] && sets="$sets $out/rows/$s"; done
		for arm in $ARMS; do
			echo "== correctness $arm"
			# shellcheck disable=SC2086
			"$B/moert" test "$out/$arm.moeb" $sets --tile=4096 || rc=1
		done
	else
		echo "== correctness: y against main's on the same inputs"
		same "$out" "$B" || rc=1
		good=$(cat "$B/good")
	fi
	rm -f "$B/bf16.txt"
	[ -f "$out/bf16.moeb" ] &&
		{ mrt bench "$out/bf16.moeb" --tokens=4096 --iters=30 --graph >"$B/bf16.txt" || rc=1; }
	# ROUNDS interleaved rounds: the first times each step alone too (--profile)
	for r in $(seq 1 "${ROUNDS:-2}"); do
		prof=
		[ "$r" = 1 ] && prof=--profile
		for arm in $good; do
			mrt bench "$out/$arm.moeb" --tokens=4096 --iters=30 --graph $prof >"$B/$arm.$r.txt" || rc=1
		done
	done
	echo "== DeepSeek-V3 layer 3, T=4096 (us; CUDA graph, median of the rounds' medians; steps alone, round 1)"
	printf '%-8s %9s %6s %9s %6s %9s %6s %8s %8s %8s  %s\n' arm layer xbf16 k3 TF/s k4 TF/s k5 k6 norm rounds
	for arm in $good; do
		[ -s "$B/bf16.txt" ] || echo none >"$B/bf16.txt"	# (awk counts files by their first line)
		# shellcheck disable=SC2046
		awk -v arm="$arm" '
			FNR == 1 { f++ }
			/^bench / { for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { split($i, v, "="); m[f] = v[2] } }
			f == 2 && $1 ~ /_k3$/ { k3 = $2 }
			f == 2 && $1 ~ /_k4$/ { k4 = $2 }
			f == 2 && $1 ~ /_k5$/ { k5 = $2 }
			f == 2 && $1 ~ /_k6$/ { k6 = $2 }
			f == 2 && $1 ~ /_k7(_norm)?$/ { k7 = $2 }
			END {
				n = 0
				for (i = 2; i <= f; i++) { r[n++] = m[i]; all = all sprintf(" %.1f", m[i]) }
				for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
				med = (n % 2) ? r[int(n / 2)] : (r[n / 2 - 1] + r[n / 2]) / 2
				R = 8 * 4096
				printf "%-8s %9.1f %5.2fx %9.1f %6.0f %9.1f %6.0f %8.1f %8.1f %8.1f %s\n", arm, med,
				       (m[1] > 0 ? m[1] / med : 0), k3, 2 * R * 4096 * 7168 / k3 / 1e6, k4,
				       2 * R * 7168 * 2048 / k4 / 1e6, k5, k6, k7, all
			}' "$B/bf16.txt" $(for r in $(seq 1 "${ROUNDS:-2}"); do echo "$B/$arm.$r.txt"; done)
	done
	# SKEW_ARMS (of those that passed): the layer with skewed routing (--skew=80, run_bench.py's), interleaved rounds
	[ -n "${SKEW_ARMS:-}" ] || exit $rc
	for r in $(seq 1 "${ROUNDS:-2}"); do
		for arm in $SKEW_ARMS; do
			grep -qx "$arm" "$B/good" 2>/dev/null || [ -d "$out/rows" ] || continue
			mrt bench "$out/$arm.moeb" --tokens=4096 --iters=30 --graph --skew=80 >"$B/$arm.skew.$r.txt" || rc=1
		done
	done
	echo "== the same, skewed routing (--skew=80): layer us, each round"
	for arm in $SKEW_ARMS; do
		[ -f "$B/$arm.skew.1.txt" ] || continue
		printf '%-8s' "$arm"
		cat "$B/$arm".skew.*.txt | sed -n 's/.*median_us=\([0-9.]*\).*/ \1/p' | tr -d '\n'
		echo
	done
	exit $rc
}

case $cmd in
prepare) [ $# = 4 ] || { echo "usage: fp8_ab.sh prepare BUILD MAIN_BUILD OUT" >&2; exit 2; }; prepare "$2" "$3" "$4" ;;
gpu) [ $# = 2 ] || { echo "usage: fp8_ab.sh gpu OUT" >&2; exit 2; }; cd "$src" && gpu "$2" ;;
*) echo "usage: fp8_ab.sh prepare BUILD MAIN_BUILD OUT | gpu OUT" >&2; exit 2 ;;
esac

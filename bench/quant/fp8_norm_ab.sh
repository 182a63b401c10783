#!/bin/sh
# fp8_norm_ab.sh — A/B of DeepSeek-V3 FP8's norm kernel (RMSNorm + e4m3 quantisation per 128 columns, the
# step before the FP8 x FP8 GEMMs; issue 13, session 33): models/deepseek-v3 layer 3 (published
# quantization_config, 128x128 blocks), synthetic weights, sm_90a bundles (gzipped), arms:
#   main    MAIN_MOEC: the norm's kernel rounds, quantises and dequantises in integer code, a div.rn an element
#   new     NEW_MOEC: bf16 rounding by cvt, a group's quotients by one reciprocal (cg_fdiv_recip), max.f32
#   cvt     NEW_MOEC --debug=f8-cvt: also e4m3 <-> f32 by cvt (two values an instruction), in the GEMM
#           epilogues' quantisation too
#   cvtglu  NEW_MOEC --debug=f8-cvt,fp8-glu: also the shared expert's gate|up FP8 x FP8 (the norm then writes
#           no dequantised bf16 rows)
#   cvtsx   NEW_MOEC --debug=f8-cvt,slots-x: cvt with the MoE slots in bf16 (the down GEMM writes and the
#           combine reads 470 MB, not 940 MB of f32; a change of numerics, session 30's flag), to size what
#           the f32 slots cost this layer
# at T = 4096 (max_tokens 4096), and main / cvt at T = 16 (max_tokens 16) as a guard.
#
#   bench/quant/fp8_norm_ab.sh prepare NEW_MOEC MAIN_MOEC DIR   here: DIR/{*.moeb.gz,*.report,run.sh}
#   OUT=<dir> sh DIR/run.sh                                       on the GPU machine, from a checkout's
#                                                                 root (tests/gpu/build_moert.sh): $OUT/f8norm/
# Correctness first: every arm on the same input (uniform in [-1, 1), seed 7), y against main's: new and cvt
# the same bits (the same arithmetic; a difference is a bug), cvtglu within e4m3 noise (rel_l2 < 3e-2);
# an arm that fails is not timed.  Then 3 interleaved rounds of moert bench --graph, medians, one --profile
# each, the table last.  Session 33's batch ran it as build/s33/f8norm/run.sh (bench/RESULTS.md).
set -u
if [ "${1:-}" = prepare ]; then
	[ $# = 4 ] || { echo "usage: fp8_norm_ab.sh prepare NEW_MOEC MAIN_MOEC DIR" >&2; exit 2; }
	new=$2 main=$3 dir=$4
	src=$(cd "$(dirname "$0")/../.." && pwd)
	mkdir -p "$dir" || exit 2
	for b in main_T4096 new_T4096 cvt_T4096 cvtglu_T4096 cvtsx_T4096 main_T16 cvt_T16; do
		a=${b%_T*} T=${b##*_T} m=$new flag=
		[ $a = main ] && m=$main
		[ $a = cvt ] && flag=--debug=f8-cvt
		[ $a = cvtglu ] && flag=--debug=f8-cvt,fp8-glu
		[ $a = cvtsx ] && flag=--debug=f8-cvt,slots-x
		# shellcheck disable=SC2086
		"$m" compile "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
			--max-tokens=$T -q $flag -o "$dir/$b.moeb" --fusion-report >"$dir/$b.report" || exit 2
		gzip -9 -f "$dir/$b.moeb" || exit 2
	done
	sed -n '/^# ---- run.sh ----$/,$p' "$0" | sed 1d >"$dir/run.sh" || exit 2
	du -sh "$dir"
	exit 0
fi
echo "usage: fp8_norm_ab.sh prepare NEW_MOEC MAIN_MOEC DIR (then OUT=<dir> sh DIR/run.sh on the GPU)" >&2
exit 2
# ---- run.sh ----
#!/bin/sh
# DeepSeek-V3 FP8 layer 3: the norm kernel's A/B (bench/quant/fp8_norm_ab.sh wrote this)
set -u
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?OUT not set}/f8norm
mkdir -p "$o" || exit 1
echo "expected: about 90 s (7 bundles: 7 runs, 21 bench runs of ~1-2 s load + 0.3 s timing, 7 profiles)" >"$o/expect.txt"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
all="main_T4096 new_T4096 cvt_T4096 cvtglu_T4096 cvtsx_T4096 main_T16 cvt_T16"
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "moert build failed" >>"$o/build.txt"; exit 1; }
for b in $all; do
	gunzip -c "$here/$b.moeb.gz" >"$tmp/$b.moeb" || exit 1
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >"$o/gpu.txt" 2>&1
# 1. correctness first: the same input for every arm; y against main's
python3 -c "import numpy as np; np.random.seed(7); x = np.random.uniform(-1, 1, (4096, 7168)).astype(np.float32); \
np.save('$tmp/x4096.npy', x); np.save('$tmp/x16.npy', x[:16])" || exit 1
touch "$tmp/bad"
for b in $all; do
	T=${b##*_T}
	mkdir -p "$tmp/$b"
	"$tmp/moert" run "$tmp/$b.moeb" --input=x="$tmp/x$T.npy" -o "$tmp/$b" >"$o/run_$b.txt" 2>&1 ||
		{ echo "run $b FAILED" >>"$o/check.txt"; echo "$b" >>"$tmp/bad"; }
done
for b in $all; do
	a=${b%_T*} T=${b##*_T}
	[ $a = main ] && continue
	exact=1
	[ $a = cvtglu ] || [ $a = cvtsx ] && exact=0
	python3 - "$tmp/x$T.npy" "$tmp/main_T$T/y.npy" "$tmp/$b/y.npy" "$b" $exact >>"$o/check.txt" 2>&1 <<'PY' || echo "$b" >>"$tmp/bad"
import sys
import numpy as np
x = np.load(sys.argv[1]).astype(np.float64)
a = np.load(sys.argv[2]).astype(np.float64)
b = np.load(sys.argv[3]).astype(np.float64)
exact = sys.argv[5] == "1"
n = lambda v: float(np.sqrt((v * v).sum()))
rel = n(a - b) / max(n(a), 1e-30)
same = bool(a.shape == b.shape and (a == b).all())
ffn_a, ffn_b = n(a - x) / n(a), n(b - x) / n(b)
good = a.shape == b.shape and np.isfinite(b).all() and ffn_a > 1e-3 and ffn_b > 1e-3 and (same if exact else rel < 3e-2)
print("check %s vs main: rel_l2 %.3g max_abs %.3g same_bits %d (want %s); ffn |y-x|/|y| main %.3g arm %.3g; %s"
      % (sys.argv[4], rel, float(np.abs(a - b).max()), int(same), "same bits" if exact else "rel_l2 < 3e-2",
         ffn_a, ffn_b, "ok" if good else "FAIL"))
sys.exit(0 if good else 1)
PY
done
[ -s "$tmp/bad" ] && echo "left out of the timing (failed above): $(tr '\n' ' ' <"$tmp/bad")" >>"$o/check.txt"
# 2. timing: 3 interleaved rounds of moert bench --graph, medians of the rounds' medians
for r in 1 2 3; do
	for b in $all; do
		grep -qx "$b" "$tmp/bad" && continue
		T=${b##*_T} a=${b%_T*} it=40
		[ $T = 16 ] && it=200
		us=$("$tmp/moert" bench "$tmp/$b.moeb" --tokens=$T --graph --iters=$it --warmup=5 2>&1 |
			sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
		echo "round=$r T=$T arm=$a us=${us:-FAILED}" >>"$o/rounds.txt"
	done
done
# 3. one profile a bundle (each step alone)
for b in $all; do
	grep -qx "$b" "$tmp/bad" && continue
	"$tmp/moert" bench "$tmp/$b.moeb" --tokens=${b##*_T} --graph --iters=20 --warmup=3 --profile \
		>"$o/profile_$b.txt" 2>&1
done
# 4. the table: the layer's medians, and the norm kernel's step from each profile
awk '{ split($2, t, "="); split($3, a, "="); split($4, u, "="); k = t[2] " " a[2]; v[k] = v[k] " " u[2] }
END { for (k in v) print k, v[k] }' "$o/rounds.txt" | sort -n | while read -r T a rest; do
	med=$(echo "$rest" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ x[NR] = $1 } END { print x[int((NR + 1) / 2)] }')
	echo "$T $a $med"
done >"$tmp/med"
{
	echo "| T | arm | layer us (median of 3) | vs main | norm step us (profile) |"
	echo "|---|---|---|---|---|"
	for b in $all; do
		T=${b##*_T} a=${b%_T*}
		m=$(awk -v T=$T '$1 == T && $2 == "main" { print $3 }' "$tmp/med")
		u=$(awk -v T=$T -v a=$a '$1 == T && $2 == a { print $3 }' "$tmp/med")
		nrm=$(awk '$1 ~ /k7_norm$/ { print $2 }' "$o/profile_$b.txt" 2>/dev/null)
		echo "| $T | $a | ${u:--} | $(awk -v m="$m" -v n="$u" 'BEGIN { if (m > 0 && n > 0) printf "%.3f", n / m }') | ${nrm:--} |"
	done
	echo "wall: $(( $(date +%s) - start )) s"
} >"$o/table.txt"
cat "$o/check.txt" "$o/table.txt"

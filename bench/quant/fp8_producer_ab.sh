#!/bin/sh
# fp8_producer_ab.sh — A/B of FP8 activations quantised by their producer (issue 13, session 32):
# Llama-4-Maverick FP8 (fbgemm_fp8, activation_scale_ub 1200) MoE layer 1, synthetic weights, T = 16 and 4096
# (sm_90a bundles, gzipped), three arms:
#   main  MAIN_MOEC: the router-scaled expert input quantised per 128 columns by an elementwise kernel of
#         its own (after the row kernel of the score multiply), the shared expert's gate|up bf16
#   new   NEW_MOEC: fuse-act-quant's cone, the score multiply and the quantisation one row kernel
#   glu   NEW_MOEC --debug=fp8-glu: also the shared expert's gate|up FP8 x FP8 (its e4m3 weights and
#         scales interleaved at load, its input quantised per 128 columns in the norm's kernel)
# and DeepSeek-V3 layer 3 (fp8, 128x128 blocks) at T = 4096, main against glu (its shared gate|up FP8 x FP8;
# its input already quantised per 128 columns by the norm's kernel): ds_main_T4096, ds_glu_T4096.
#
#   bench/quant/fp8_producer_ab.sh prepare NEW_MOEC MAIN_MOEC DIR   here: DIR/{config.json,*.moeb.gz,run.sh}
#   OUT=<dir> sh DIR/run.sh                                           on the GPU machine, from a checkout's
#                                                                     root (tests/gpu/build_moert.sh): $OUT/mavq/
# Session 32's batch ran it as build/s32/mavq/run.sh (bench/RESULTS.md).
set -u
if [ "${1:-}" = prepare ]; then
	[ $# = 4 ] || { echo "usage: fp8_producer_ab.sh prepare NEW_MOEC MAIN_MOEC DIR" >&2; exit 2; }
	new=$2 main=$3 dir=$4
	src=$(cd "$(dirname "$0")/../.." && pwd)
	mkdir -p "$dir" || exit 2
	python3 - "$src/models/llama-4-maverick-17b-128e-instruct/config.json" "$dir/config.json" <<'PY' || exit 2
import json, sys
c = json.load(open(sys.argv[1]))
c["quantization_config"] = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                            "modules_to_not_convert": ["language_model.model.layers.*.self_attn",
                                                       "language_model.model.layers.*.feed_forward.router",
                                                       "vision_model", "multi_modal_projector", "lm_head"]}
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
	for T in 16 4096; do
		for a in main new glu; do
			m=$new flag=
			[ $a = main ] && m=$main
			[ $a = glu ] && flag=--debug=fp8-glu
			"$m" compile "$dir/config.json" --layer 1 --synthetic-weights=1 --arch=sm_90a --max-tokens=$T -q \
				$flag -o "$dir/${a}_T$T.moeb" --fusion-report >"$dir/${a}_T$T.report" || exit 2
			gzip -9 -f "$dir/${a}_T$T.moeb" || exit 2
		done
	done
	for a in main glu; do
		m=$new flag=
		[ $a = main ] && m=$main
		[ $a = glu ] && flag=--debug=fp8-glu
		"$m" compile "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
			--max-tokens=4096 -q $flag -o "$dir/ds_${a}_T4096.moeb" --fusion-report >"$dir/ds_${a}_T4096.report" || exit 2
		gzip -9 -f "$dir/ds_${a}_T4096.moeb" || exit 2
	done
	sed -n '/^# --- the GPU part/,$p' "$0" | sed '1s/.*/#!\/bin\/sh/' >"$dir/run.sh"
	echo "ok $dir: OUT=<dir> sh $dir/run.sh on the GPU machine"
	exit 0
fi
# --- the GPU part (prepare copies it to DIR/run.sh): OUT=<dir> sh DIR/run.sh from a checkout's root
set -u
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?OUT not set}/mavq
mkdir -p "$o" || exit 1
echo "expected: about 100 s (Maverick 3 arms x 2 T, DeepSeek-V3 2 arms: 8 runs, 24 bench runs of ~1 s load + timing, 8 profiles)" >"$o/expect.txt"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "moert build failed" >>"$o/build.txt"; exit 1; }
for b in main_T16 new_T16 glu_T16 main_T4096 new_T4096 glu_T4096 ds_main_T4096 ds_glu_T4096; do
	gunzip -c "$here/$b.moeb.gz" >"$tmp/$b.moeb" || exit 1
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >"$o/gpu.txt" 2>&1
# 1. correctness first: every arm on the same input (uniform in [-1, 1), seed 7; the same routing: the norm and
#    the router GEMM are the same kernels); new and glu against main within the tolerance of e4m3 noise
#    (rel_l2 < 3e-2: session 31's regrouping alone moved Maverick's y by 1.05e-2; new should be main's bits or
#    next to them), finite, and the FFN not zero (|y - x| / |y| > 1e-3).  An arm that fails is left out of the
#    timing (listed in check.txt), the others are timed.
touch "$tmp/bad"
python3 -c "import numpy as np; np.random.seed(7); \
np.save('$tmp/xds.npy', np.random.uniform(-1, 1, (4096, 7168)).astype(np.float32))" || exit 1
for T in 16 4096 ds; do
	arms="main new glu" x=$tmp/x$T.npy p= t=$T
	[ $T = ds ] && arms="main glu" p=ds_ t=4096
	[ $T = ds ] || python3 -c "import numpy as np; np.random.seed(7); \
np.save('$x', np.random.uniform(-1, 1, ($T, 5120)).astype(np.float32))" || exit 1
	for a in $arms; do
		mkdir -p "$tmp/$a$T"
		"$tmp/moert" run "$tmp/$p${a}_T$t.moeb" --input=x="$x" -o "$tmp/$a$T" >"$o/run_$p${a}_T$t.txt" 2>&1 ||
			{ echo "run $p$a T=$t FAILED" >>"$o/check.txt"; echo "$p${a}_T$t" >>"$tmp/bad"; }
	done
	for a in $arms; do
		[ $a = main ] && continue
		python3 - "$x" "$tmp/main$T/y.npy" "$tmp/$a$T/y.npy" "$T" "$a" >>"$o/check.txt" 2>&1 <<'PY' || echo "$p${a}_T$t" >>"$tmp/bad"
import sys
import numpy as np
x = np.load(sys.argv[1]).astype(np.float64)
a = np.load(sys.argv[2]).astype(np.float64)
b = np.load(sys.argv[3]).astype(np.float64)
n = lambda v: float(np.sqrt((v * v).sum()))
rel = n(a - b) / max(n(a), 1e-30)
ffn_a, ffn_b = n(a - x) / n(a), n(b - x) / n(b)
ffn_rel = n((a - x) - (b - x)) / max(n(a - x), 1e-30)
good = a.shape == b.shape and np.isfinite(b).all() and rel < 3e-2 and ffn_a > 1e-3 and ffn_b > 1e-3
print("check T=%s %s vs main: rel_l2 %.3g max_abs %.3g same_bits %d; ffn |y-x|/|y| main %.3g %s %.3g; ffn rel_l2 %.3g %s"
      % (sys.argv[4], sys.argv[5], rel, float(np.abs(a - b).max()), int((a == b).all()), ffn_a, sys.argv[5], ffn_b,
         ffn_rel, "ok" if good else "FAIL"))
sys.exit(0 if good else 1)
PY
	done
done
[ -s "$tmp/bad" ] && echo "left out of the timing (failed above): $(cat "$tmp/bad" | tr '\n' ' ')" >>"$o/check.txt"
# 2. timing: 3 interleaved rounds of moert bench --graph (60 iters), medians of the rounds' medians
for r in 1 2 3; do
	for b in main_T16 new_T16 glu_T16 main_T4096 new_T4096 glu_T4096 ds_main_T4096 ds_glu_T4096; do
		grep -qx "$b" "$tmp/bad" && continue
		T=${b##*_T} a=${b%_T*}
		us=$("$tmp/moert" bench "$tmp/$b.moeb" --tokens=$T --graph --iters=60 --warmup=10 2>&1 |
			sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
		echo "round=$r T=$T arm=$a us=${us:-FAILED}" >>"$o/rounds.txt"
	done
done
# 3. one profile a bundle (each step alone)
for b in main_T16 new_T16 glu_T16 main_T4096 new_T4096 glu_T4096 ds_main_T4096 ds_glu_T4096; do
	grep -qx "$b" "$tmp/bad" && continue
	"$tmp/moert" bench "$tmp/$b.moeb" --tokens=${b##*_T} --graph --iters=30 --warmup=5 --profile \
		>"$o/profile_$b.txt" 2>&1
done
# 4. the table
awk '{ split($2, t, "="); split($3, a, "="); split($4, u, "="); k = t[2] " " a[2]; v[k] = v[k] " " u[2] }
END { for (k in v) print k, v[k] }' "$o/rounds.txt" | sort -n | while read -r T a rest; do
	med=$(echo "$rest" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ x[NR] = $1 } END { print x[int((NR + 1) / 2)] }')
	echo "$T $a $med"
done >"$tmp/med"
{
	echo "| T | main us | new us | glu us | new/main | glu/main |"
	echo "|---|---|---|---|---|---|"
	for T in 16 4096; do
		m=$(awk -v T=$T '$1 == T && $2 == "main" { print $3 }' "$tmp/med")
		n=$(awk -v T=$T '$1 == T && $2 == "new" { print $3 }' "$tmp/med")
		g=$(awk -v T=$T '$1 == T && $2 == "glu" { print $3 }' "$tmp/med")
		echo "| $T | $m | $n | $g | $(awk -v m="$m" -v n="$n" 'BEGIN { if (m > 0) printf "%.3f", n / m }') |" \
			"$(awk -v m="$m" -v n="$g" 'BEGIN { if (m > 0) printf "%.3f", n / m }') |"
	done
	m=$(awk '$1 == 4096 && $2 == "ds_main" { print $3 }' "$tmp/med")
	g=$(awk '$1 == 4096 && $2 == "ds_glu" { print $3 }' "$tmp/med")
	echo "| DeepSeek-V3 4096 | $m | - | $g | - | $(awk -v m="$m" -v n="$g" 'BEGIN { if (m > 0) printf "%.3f", n / m }') |"
	echo "wall: $(( $(date +%s) - start )) s"
} >"$o/table.txt"
cat "$o/check.txt" "$o/table.txt"

#!/bin/sh
# fp8_channel_ab.sh — A/B of per-channel FP8 (issue 13, session 31): Llama-4-Maverick FP8 (fbgemm_fp8,
# activation_scale_ub 1200) MoE layer 1, synthetic weights in e4m3 with a scale per output channel, at
# T = 16 and T = 4096 (sm_90a bundles, gzipped):
#   main  MAIN_MOEC: session 30's path, the per-channel e4m3 weights in mixed-input GEMMs (bf16 mma),
#         activations per token (or NEW_MOEC with --debug=fp8-per-token)
#   new   NEW_MOEC: fp8-regroup, the expert gate|up and down and the shared down FP8 x FP8 (e4m3 wgmma),
#         activations per token and 128 columns
#
#   bench/quant/fp8_channel_ab.sh prepare NEW_MOEC MAIN_MOEC DIR   here: DIR/{config.json,*.moeb.gz,run.sh}
#   OUT=<dir> sh DIR/run.sh                                          on the GPU machine, from a checkout's root
#                                                                    (tests/gpu/build_moert.sh): $OUT/fp8ch/
# Session 31's batch ran it as build/s31/fp8ch/run.sh (bench/RESULTS.md).
set -u
if [ "${1:-}" = prepare ]; then
	[ $# = 4 ] || { echo "usage: fp8_channel_ab.sh prepare NEW_MOEC MAIN_MOEC DIR" >&2; exit 2; }
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
		"$main" compile "$dir/config.json" --layer 1 --synthetic-weights=1 --arch=sm_90a --max-tokens=$T -q \
			-o "$dir/main_T$T.moeb" --fusion-report >"$dir/main_T$T.report" || exit 2
		"$new" compile "$dir/config.json" --layer 1 --synthetic-weights=1 --arch=sm_90a --max-tokens=$T -q \
			-o "$dir/new_T$T.moeb" --fusion-report >"$dir/new_T$T.report" || exit 2
		gzip -9 -f "$dir/main_T$T.moeb" "$dir/new_T$T.moeb" || exit 2
	done
	sed -n '/^# --- the GPU part/,$p' "$0" | sed '1s/.*/#!\/bin\/sh/' >"$dir/run.sh"
	echo "ok $dir: OUT=<dir> sh $dir/run.sh on the GPU machine"
	exit 0
fi
# --- the GPU part (prepare copies it to DIR/run.sh): OUT=<dir> sh DIR/run.sh from a checkout's root
set -u
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?OUT not set}/fp8ch
mkdir -p "$o" || exit 1
echo "expected: about 90 s (8 bench runs of ~1 s load + timing, 4 runs, 4 profiles)" >"$o/expect.txt"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "moert build failed" >>"$o/build.txt"; exit 1; }
for b in main_T16 new_T16 main_T4096 new_T4096; do
	gunzip -c "$here/$b.moeb.gz" >"$tmp/$b.moeb" || exit 1
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >"$o/gpu.txt" 2>&1
# 1. correctness first: both arms on the same input (uniform in [-1, 1), seed 7); the routing is the same
#    (the norm and the router GEMM are the same kernels); new against main within the bf16 tolerance
#    (rel_l2 < 2e-2: the regrouping's e4m3 noise, not a wrong tile), finite, and the FFN not zero
#    (|y - x| / |y| > 1e-3, y - x being the FFN)
ok=1
for T in 16 4096; do
	python3 -c "import numpy as np; np.random.seed(7); \
np.save('$tmp/x$T.npy', np.random.uniform(-1, 1, ($T, 5120)).astype(np.float32))" || exit 1
	for a in main new; do
		mkdir -p "$tmp/$a$T"
		"$tmp/moert" run "$tmp/${a}_T$T.moeb" --input=x="$tmp/x$T.npy" -o "$tmp/$a$T" >"$o/run_${a}_T$T.txt" 2>&1 ||
			{ echo "run $a T=$T FAILED" >>"$o/check.txt"; ok=0; }
	done
	python3 - "$tmp/x$T.npy" "$tmp/main$T/y.npy" "$tmp/new$T/y.npy" "$T" >>"$o/check.txt" 2>&1 <<'PY' || ok=0
import sys
import numpy as np
x = np.load(sys.argv[1]).astype(np.float64)
a = np.load(sys.argv[2]).astype(np.float64)
b = np.load(sys.argv[3]).astype(np.float64)
n = lambda v: float(np.sqrt((v * v).sum()))
rel = n(a - b) / max(n(a), 1e-30)
ffn_a, ffn_b = n(a - x) / n(a), n(b - x) / n(b)
ffn_rel = n((a - x) - (b - x)) / max(n(a - x), 1e-30)
good = a.shape == b.shape and np.isfinite(b).all() and rel < 2e-2 and ffn_a > 1e-3 and ffn_b > 1e-3
print("check T=%s new vs main: rel_l2 %.3g max_abs %.3g; ffn |y-x|/|y| main %.3g new %.3g; ffn rel_l2 %.3g %s"
      % (sys.argv[4], rel, float(np.abs(a - b).max()), ffn_a, ffn_b, ffn_rel, "ok" if good else "FAIL"))
sys.exit(0 if good else 1)
PY
done
[ "$ok" = 1 ] || { echo "correctness failed: no timing" >>"$o/check.txt"; exit 1; }
# 2. timing: 3 interleaved rounds of moert bench --graph (60 iters), medians of the rounds' medians
for r in 1 2 3; do
	for T in 16 4096; do
		for a in main new; do
			us=$("$tmp/moert" bench "$tmp/${a}_T$T.moeb" --tokens=$T --graph --iters=60 --warmup=10 2>&1 |
				sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
			echo "round=$r T=$T arm=$a us=${us:-FAILED}" >>"$o/rounds.txt"
		done
	done
done
# 3. one profile a bundle (each step alone)
for T in 16 4096; do
	for a in main new; do
		"$tmp/moert" bench "$tmp/${a}_T$T.moeb" --tokens=$T --graph --iters=30 --warmup=5 --profile \
			>"$o/profile_${a}_T$T.txt" 2>&1
	done
done
# 4. the table
awk '{ split($2, t, "="); split($3, a, "="); split($4, u, "="); k = t[2] " " a[2]; v[k] = v[k] " " u[2] }
END { for (k in v) print k, v[k] }' "$o/rounds.txt" | sort -n | while read -r T a rest; do
	med=$(echo "$rest" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ x[NR] = $1 } END { print x[int((NR + 1) / 2)] }')
	echo "$T $a $med"
done >"$tmp/med"
{
	echo "| T | main us | new us | new/main |"
	echo "|---|---|---|---|"
	for T in 16 4096; do
		m=$(awk -v T=$T '$1 == T && $2 == "main" { print $3 }' "$tmp/med")
		n=$(awk -v T=$T '$1 == T && $2 == "new" { print $3 }' "$tmp/med")
		echo "| $T | $m | $n | $(awk -v m="$m" -v n="$n" 'BEGIN { if (m > 0) printf "%.3f", n / m }') |"
	done
	echo "wall: $(( $(date +%s) - start )) s"
} >"$o/table.txt"
cat "$o/check.txt" "$o/table.txt"

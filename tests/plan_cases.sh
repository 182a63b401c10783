#!/bin/sh
# plan_cases.sh MOEC SRC — the tile heuristic's launch plans for the decode
# bench cases whose times are logged (bench/RESULTS.md; docs/codegen.md,
# "Stream-K for decode": the model, its numbers, and the measured best per
# case).  Each case is compiled for sm_90a with synthetic weights as
# bench/make_bench.sh does, and `moec compile -v` must name, for each GEMM,
# the variant of the table below.  Exit 0 or 1.
set -u
moec=$1 src=$2
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail=0
# the bf16 configs of the quantised checkpoints, as make_bench.sh's bf16cfg
for m in deepseek-v3 gpt-oss-20b; do
	mkdir -p "$d/$m"
	python3 "$src/bench/bf16_config.py" "$src/models/$m/config.json" "$d/$m/config.json" || exit 1
done
compile() {	# compile NAME TOKENS MODEL [flags]: NAME.log holds the -v remarks
	name=$1 tokens=$2 model=$3
	shift 3
	"$moec" compile "$model" "$@" --arch=sm_90a --max-tokens="$tokens" -v -o "$d/$name.moeb" \
		>"$d/$name.log" 2>&1 || { cat "$d/$name.log"; echo "plan_cases: $name: compile failed"; exit 1; }
}
compile qwen3_T16 16 "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
compile qwen3_T1 1 "$src/models/qwen3-30b-a3b/config.json" --layer 0 --synthetic-weights=1
compile mixtral_T16 16 "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
compile deepseek_T16 16 "$d/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
compile deepseek_T256 256 "$d/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
compile gptoss_T16 16 "$d/gpt-oss-20b/config.json" --layer 0 --synthetic-weights=1
compile dense_up_M16 16 "$src/bench/models/dense_up.ir"
compile dense_up_M4096 4096 "$src/bench/models/dense_up.ir"
compile mixtral_T4096 4096 "$src/models/mixtral-8x7b/config.json" --layer 0 --synthetic-weights=1
compile deepseek_T4096 4096 "$d/deepseek-v3/config.json" --layer 3 --synthetic-weights=1
# case   kernel  tuning key   variant (+pp: ping-pong consumers; +vec: warp dot products; +c2: clusters of 2
# sharing B)   (the logged measurement behind it)
pp=', ping-pong consumers (128x128 each, persistent)'
c2=', clusters of 2 sharing B (dense-c2: 128x256, persistent, TMA stores)'
vec=', warp dot products on CUDA cores (gemm-vec, persistent)'
while read -r name k key v why; do
	case $name in '#'*|'') continue ;; esac
	tail=
	case $v in *+pp) v=${v%+pp} tail=$pp ;; *+vec) v=${v%+vec} tail=$vec ;; *+c2) v=${v%+c2} tail=$c2 ;; esac
	grep -q "\.$k on sm_90a: tuning key $key, variant $v (heuristic)$tail\$" "$d/$name.log" && continue
	echo "plan_cases: $name $k $key: want $v ($why), got:"
	grep "\.$k on sm_90a: tuning key" "$d/$name.log"
	fail=1
done <<'EOF_CASES'
# Qwen3-30B-A3B T=16: tiles 259.0 us, stream-K for both GEMMs 269.7 (+4.1%) in session 24; in session 25's A/B
# (bench/results/2026-12-02-s25-plan_ab.log) tiles for down 256.5 us against stream-K 252.7/259.4: noise, so stream-K
qwen3_T16 k3 g128.m8.n1536.k2048.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 tie
# its down (K = 768: 192 KB a 128-column tile) wide (dec_wide): alone 85.6 -> 77.4 us, block 0.972x (session 34)
qwen3_T16 k4 g128.m8.n2048.k768.bf16.bf16.nk.t2-16 16x256x128.w1x8.s3.k1.p132 wide-k4-85.6->77.4
# Qwen3-30B-A3B T=1: gate|up 16x128x128 34.4 us vs 16x64x128 45.1 (tune log); stream-K 79.6 us the block
qwen3_T1 k3 g128.m8.n1536.k2048.bf16.bf16.nk.t1-1 1x2x8.w1x8.s2.k1+vec vec-block-56.8->38.6
qwen3_T1 k4 g128.m8.n2048.k768.bf16.bf16.nk.t1-1 1x4x8.w1x8.s2.k1+vec vec-k4-19.7->11.4
# Mixtral T=16: stream-K 777 us against tiles 784
mixtral_T16 k3 g8.m2.n28672.k4096.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 block-0.9%
mixtral_T16 k4 g8.m2.n4096.k14336.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 block-0.9%
# DeepSeek-V3 T=16: all stream-K; session 25's A/B of a refitted model that gave the down projection tiles and the
# shared expert split-K: 2392 us against 2316 uniform, 581 against 524 skewed (bench/results/2026-12-02-s25-plan_ab.log)
deepseek_T16 k3 g256.m8.n4096.k7168.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 tie,skew-11%
deepseek_T16 k4 g256.m8.n7168.k2048.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 stream-K
deepseek_T16 k5 dense.m1.n4096.k7168.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 stream-K
deepseek_T16 k6 dense.m1.n7168.k2048.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132 stream-K
# DeepSeek-V3 T=256: 64-row tiles past decode (skewed 3050 -> 1747 us), decode variant without stream-K
deepseek_T256 k3 g256.m8.n4096.k7168.bf16.bf16.nk.t65-256 64x128x64.w2x2.s4.k1 skew
deepseek_T256 k4 g256.m8.n7168.k2048.bf16.bf16.nk.t65-256 64x128x64.w2x2.s4.k1 skew
deepseek_T256 k3 g256.m8.n4096.k7168.bf16.bf16.nk.t17-64 16x128x128.w1x4.s5.k1 T>bm
# gpt-oss-20b T=16: stream-K 464 us against tiles 505; gate|up 128 columns fitted to K = 2880 (bk 64):
# 268.9 against 313.9 us at 16x64x64 (session 24's tune log), 2 CTAs an SM
gptoss_T16 k3 g32.m4.n5760.k2880.bf16.bf16.nk.t2-16 16x128x64.w1x4.s5.k1.p264 tune-14%
# its down wide (dec_wide: 368 KB a 64-column tile): alone 139.3 -> 131.6 us, block 0.975x (session 34)
gptoss_T16 k4 g32.m4.n2880.k2880.bf16.bf16.nk.t2-16 16x192x64.w1x4.s5.k1.p132 wide-k4-139.3->131.6
# dense up-projection M=16: stream-K 40.7 us, tiles 40.8 (session 25); session 39 (whole_wave, bench/ab/s39-d16b.ab,
# 6 interleaved rounds): whole tiles 38.5 -> 37.2 us at T = 16 (0.966x), 0.935x at T = 1
dense_up_M16 k0 dense.m1.n14336.k4096.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1 whole-wave-0.966x
# Ping-pong per T bucket (bench/results/2026-12-02-s25-final-gemm.log, kernels alone): dense N 14336 at M=1024
# 184 us against 207 cooperative (3.4 of 4 waves filled against 6.8 of 7), M=4096 763 against 723 (equal fill);
# 112 of 132 SMs either way at 256 rows
dense_up_M4096 k0 dense.m1.n14336.k4096.bf16.bf16.nk.t65-256 256x128x64.w4x2.s4.k1 equal-fill
dense_up_M4096 k0 dense.m1.n14336.k4096.bf16.bf16.nk.t257-1024 256x128x64.w4x2.s4.k1+pp 184/207us
# over 1024 rows, cooperative plans in clusters of 2 sharing B (dense-c2, session 37: M=4096 675.0 -> 656.5 us)
dense_up_M4096 k0 dense.m1.n14336.k4096.bf16.bf16.nk.t1025-4096 256x128x64.w4x2.s4.k1+c2 763/723us,c2-0.973x
# MoE down projections up to 32 k-tiles: DeepSeek-V3's 2691 against 2966 us; not Mixtral's (224 k-tiles): 1594
# against 1527 in the block (session 26), though 1461 against 1548 alone (against the persistent cooperative)
mixtral_T4096 k4 g8.m2.n4096.k14336.bf16.bf16.nk.t1025-4096 128x256x64.w2x4.s4.k1 1594/1527us
mixtral_T4096 k3 g8.m2.n28672.k4096.bf16.bf16.nk.t1025-4096 128x256x64.w2x4.s4.k1 gathered
deepseek_T4096 k4 g256.m8.n7168.k2048.bf16.bf16.nk.t1025-4096 128x256x64.w2x4.s4.k1+pp 2691/2966us
# DeepSeek-V3's shared expert: cooperative at T=4096 (up: 399 against 441 us in session 25's run 1), ping-pong where
# its 256-row tiles leave most SMs idle (T <= 256: 32 and 56 CTAs)
deepseek_T4096 k5 dense.m1.n4096.k7168.bf16.bf16.nk.t1025-4096 256x128x64.w4x2.s4.k1+c2 399/441us,c2-block-0.993x
deepseek_T4096 k6 dense.m1.n7168.k2048.bf16.bf16.nk.t1025-4096 256x128x64.w4x2.s4.k1+c2 equal-fill,c2-block-0.993x
deepseek_T4096 k6 dense.m1.n7168.k2048.bf16.bf16.nk.t65-256 256x128x64.w4x2.s4.k1+pp waves
EOF_CASES
[ "$fail" = 0 ] && echo "plan_cases: ok"
exit $fail

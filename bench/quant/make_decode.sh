#!/bin/sh
# make_decode.sh MOEC OUT — compile (here, no GPU) the quantised decode
# bundles for run_decode.sh: full-size MoE layers from their published
# quantization_config with synthetic weights in their own format (generated
# on the device at load: the bundles hold seed and layout, a few MB in all),
# their bf16 blocks (the same configs without quantization_config), and the
# dense W4A16 projections with tile variants (tuning tables) for the decode
# bandwidth sweep, and candidate bundles of the gpt-oss and Mixtral GPTQ
# blocks for moert tune.  sm_90a, --max-tokens=16.  Writes OUT/cases.txt:
# "name bundle pair" (pair: the bf16 case it is compared with, or -), and
# OUT/NAME.cand.moeb.
# Exit 0 all compiled, 1 a compile failed.
set -eu
moec=$1 out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
: > "$out/cases.txt"

one() {	# one NAME PAIR MODEL [moec flags...]
	name=$1 pair=$2 model=$3
	shift 3
	"$moec" compile "$model" "$@" --arch=sm_90a --max-tokens=16 -v -o "$out/$name.moeb" \
		>"$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
	echo "$name $name.moeb $pair" >> "$out/cases.txt"
	echo "ok   $name ($(wc -c < "$out/$name.moeb") bytes)"
}

cfg() {	# cfg MODEL NAME QUANT_JSON: OUT/NAME/config.json, MODEL's with quantization_config QUANT_JSON ("" drops it)
	mkdir -p "$out/$2"
	python3 - "$src/models/$1/config.json" "$out/$2/config.json" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("quantization_config", None)
c["torch_dtype"] = c["dtype"] = "bfloat16"
if sys.argv[3]:
    c["quantization_config"] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
}
cfg deepseek-v3 deepseek-v3-bf16 ""
cfg gpt-oss-20b gpt-oss-20b-bf16 ""
cfg mixtral-8x7b mixtral-8x7b-bf16 ""
# a GPTQ int4 Mixtral (TheBloke/Mixtral-8x7B-v0.1-GPTQ's scheme: 4 bits, groups of 128, no act-order)
cfg mixtral-8x7b mixtral-8x7b-gptq '{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false,
	"sym": true, "checkpoint_format": "gptq", "modules_to_not_convert": ["gate"]}'

# candidate bundles for moert tune (run_decode.sh tunes them at T=16; CAND=1:
# about 5 minutes on the device): every GEMM's tile, stage and split
# variants, quantised ones included, each staged and direct
cand() {	# cand NAME MODEL [moec flags...]
	cn=$1 cm=$2
	shift 2
	"$moec" compile "$cm" "$@" --arch=sm_90a --max-tokens=16 --tune-candidates -o "$out/$cn.cand.moeb" \
		>"$out/$cn.cand.log" 2>&1 || { tail -5 "$out/$cn.cand.log"; exit 1; }
	echo "ok   $cn.cand ($("$moec" inspect "$out/$cn.cand.moeb" | grep -c ' for step ') candidates)"
}
if [ "${CAND:-0}" = 1 ]; then
cand gptoss_mxfp4 "$src/models/gpt-oss-20b" --layer 0 --synthetic-weights=1
cand mixtral_gptq "$out/mixtral-8x7b-gptq/config.json" --layer 0 --synthetic-weights=1
fi

one dsv3_fp8 dsv3_bf16 "$src/models/deepseek-v3" --layer 3 --synthetic-weights=1
one dsv3_bf16 - "$out/deepseek-v3-bf16/config.json" --layer 3 --synthetic-weights=1
one gptoss_mxfp4 gptoss_bf16 "$src/models/gpt-oss-20b" --layer 0 --synthetic-weights=1
one gptoss_bf16 - "$out/gpt-oss-20b-bf16/config.json" --layer 0 --synthetic-weights=1
one mixtral_gptq mixtral_bf16 "$out/mixtral-8x7b-gptq/config.json" --layer 0 --synthetic-weights=1
one mixtral_bf16 - "$out/mixtral-8x7b-bf16/config.json" --layer 0 --synthetic-weights=1

# the quantised blocks with other tiles for their grouped GEMMs (one tuning
# table each: KEY=VARIANT words; a variant the builder refuses keeps the
# heuristic's tile, with a warning in NAME.log: said here as NOT TAKEN)
block() {	# block NAME PAIR MODEL "KEY=VARIANT ..." [moec flags...]
	bn=$1 bp=$2 bm=$3 kv=$4
	shift 4
	printf 'moec-tuning 1\n' > "$out/$bn.tuning"
	for x in $kv; do printf 'sm_90a %s %s\n' "${x%%=*}" "${x#*=}" >> "$out/$bn.tuning"; done
	one "$bn" "$bp" "$bm" "$@" --tuning="$out/$bn.tuning"
	if grep -q 'does not fit' "$out/$bn.log"; then
		echo "     NOT TAKEN: $(grep -o 'variant [^ ]* for [^ ]* does not fit[^;]*' "$out/$bn.log" | head -2)"
	fi
}
# Session 28: grouped quantised decode GEMMs take wide stream-K runs by
# default (program.c's bq_stream, session 27: gpt-oss 16x192x64 s4 over 528
# CTAs, Mixtral GPTQ 16x256x128 s3 over 396; blocks 200.5 -> 171.1 and
# 317.5 -> 278.0 us); .tiles (--debug=bq-tiles) is session 26's plan.  The
# variants (tuning tables; .pN: stream-K over N CTAs; .lN: a launch bound of
# N CTAs an SM, which makes ptxas fit the registers: ncu has these kernels
# short of warps, 4 CTAs of 4 an SM at 118-166 registers):
#   .unroll --debug=sk-unroll (session 29): the stream-K pair loop unrolled over
#           the stages, counters carried instead of divisions (the same bits)
#   .s3l5   gpt-oss: the same at 3 stages; .l6: 6 CTAs an SM (80 registers, 20 bytes spilled)
#   .d660   gpt-oss: the down projection alone over 660 (96 registers: 5 fit unbounded)
#   .t320   gpt-oss: 320-column tiles (10 n8 blocks a warp), 3 stages, 3 CTAs an SM
#           (164 registers); .t320l4 the same at 4 (128 registers)
#   .bk192  gpt-oss: 16x192x192 at 2 stages, 4 CTAs an SM (128 registers): a third of the loop
#           overhead a fragment (ncu of session 28: ~85 of the ~305 instructions a warp spends on a
#           16x192x64 k-tile are loop, refill and stream-K bookkeeping); .bk192p unbounded, 3 an SM
#   .w2     gpt-oss: 16x192 over 2 warps (12 n8 blocks a warp), 6 CTAs an SM
#   .l4     Mixtral: 16x256x128 s2 at 4 CTAs an SM (128 registers, no spills)
#   .t512   Mixtral: 16x512x128 over 8 warps, 2 stages, 2 CTAs an SM (128 registers)
#   .bk256  Mixtral: 16x256x256 at 2 stages, 2 CTAs an SM (a barrier per 2 groups)
# Session 27's other variants (measured no faster: bench/results/2026-12-02-s27-
# quant-decode-variants.txt) are gone; direct B's cases only with DIRECT=1.
d=--debug=bq-direct st=--debug=bq-tiles
gu=g32.m4.n5760.k2880.bf16.f4e2m1.nk.t1-16 dn=g32.m4.n2880.k2880.bf16.f4e2m1.nk.t1-16
go=$src/models/gpt-oss-20b
one gptoss_mxfp4.tiles gptoss_bf16 "$go" --layer 0 --synthetic-weights=1 $st
one gptoss_mxfp4.unroll gptoss_bf16 "$go" --layer 0 --synthetic-weights=1 --debug=sk-unroll
both() {	# both NAME PAIR MODEL VARIANT: one variant for the gate|up and the down GEMM
	block "$1" "$2" "$3" "$gu=$4 $dn=$4" --layer 0 --synthetic-weights=1
}
both gptoss_mxfp4.s3l5 gptoss_bf16 "$go" 16x192x64.w1x4.s3.k1.p660.l5
both gptoss_mxfp4.l6 gptoss_bf16 "$go" 16x192x64.w1x4.s4.k1.p792.l6
block gptoss_mxfp4.d660 gptoss_bf16 "$go" "$dn=16x192x64.w1x4.s4.k1.p660" --layer 0 --synthetic-weights=1
both gptoss_mxfp4.t320 gptoss_bf16 "$go" 16x320x64.w1x4.s3.k1.p396
both gptoss_mxfp4.t320l4 gptoss_bf16 "$go" 16x320x64.w1x4.s3.k1.p528.l4
both gptoss_mxfp4.bk192 gptoss_bf16 "$go" 16x192x192.w1x4.s2.k1.p528.l4
both gptoss_mxfp4.bk192p gptoss_bf16 "$go" 16x192x192.w1x4.s2.k1.p396
both gptoss_mxfp4.w2 gptoss_bf16 "$go" 16x192x64.w1x2.s4.k1.p792
[ "${DIRECT:-0}" = 1 ] && one gptoss_mxfp4.direct gptoss_bf16 "$go" --layer 0 --synthetic-weights=1 $d
gu=g8.m2.n28672.k4096.bf16.u4.nk.t1-16 dn=g8.m2.n4096.k14336.bf16.u4.nk.t1-16
mx=$out/mixtral-8x7b-gptq/config.json
one mixtral_gptq.tiles mixtral_bf16 "$mx" --layer 0 --synthetic-weights=1 $st
one mixtral_gptq.unroll mixtral_bf16 "$mx" --layer 0 --synthetic-weights=1 --debug=sk-unroll
both mixtral_gptq.l4 mixtral_bf16 "$mx" 16x256x128.w1x4.s2.k1.p528.l4
both mixtral_gptq.t512 mixtral_bf16 "$mx" 16x512x128.w1x8.s2.k1.p264.l2
both mixtral_gptq.bk256 mixtral_bf16 "$mx" 16x256x256.w1x4.s2.k1.p264
[ "${DIRECT:-0}" = 1 ] && one mixtral_gptq.direct mixtral_bf16 "$mx" --layer 0 --synthetic-weights=1 $d

# dense W4A16 at two sizes (12288x4096: RESULTS' 2026-12-02 case), each with the
# heuristic's tiles and the variants of the sweep (split-K for quantised B
# since 2026-12-02); a variant the builder refuses is left out
sed -e 's/28672/12288/g' -e 's/8192/4096/g' -e 's/,64\]/,32]/' "$src/bench/quant/dense_w4a16.ir" > "$out/w4_12k.ir"
sed -e 's/28672/12288/g' -e 's/8192/4096/g' "$src/bench/quant/dense_bf16.ir" > "$out/bf16_12k.ir"
one w4_12k bf16_12k "$out/w4_12k.ir"
one bf16_12k - "$out/bf16_12k.ir"
cp "$src/bench/quant/dense_w4a16.ir" "$out/w4_28k.ir"
cp "$src/bench/quant/dense_bf16.ir" "$out/bf16_28k.ir"
one w4_28k bf16_28k "$out/w4_28k.ir"
one bf16_28k - "$out/bf16_28k.ir"
# the dense sweep (SWEEP=direct: direct B's tiles, with bq-direct's lane
# vectors; SWEEP=staged: the staged ones); none by default
for shape in 12k:n12288.k4096 28k:n28672.k8192; do
	[ -n "${SWEEP:-}" ] || break
	s=${shape%%:*} key=dense.m1.${shape#*:}.bf16.i4.nk.t1-16
	vs="16x64x256.w1x4.s3.k1.d 16x64x256.w1x4.s3.k2.d 16x128x256.w1x4.s3.k1.d 16x128x256.w1x4.s3.k2.d \
	    16x128x128.w1x4.s4.k2.d 16x128x256.w1x8.s3.k2.d"
	[ "${SWEEP:-}" = staged ] && vs="16x64x128.w1x4.s5.k1 16x64x128.w1x4.s5.k2 16x128x128.w1x4.s5.k1 \
	    16x128x128.w1x4.s5.k2 16x128x128.w1x4.s5.k4 16x256x128.w1x4.s4.k1 16x256x128.w1x4.s4.k2 16x256x128.w1x4.s4.k4"
	for v in $vs; do
		printf 'moec-tuning 1\nsm_90a %s %s\n' "$key" "$v" > "$out/w4_$s.$v.tuning"
		case $v in *.d) f=$d ;; *) f= ;; esac
		# shellcheck disable=SC2086
		one "w4_$s.$v" "bf16_$s" "$out/w4_$s.ir" --tuning="$out/w4_$s.$v.tuning" $f
		if ! grep -q 'tuning table' "$out/w4_$s.$v.log"; then
			echo "     (refused: $(grep -o 'does not fit[^;]*' "$out/w4_$s.$v.log" | head -1)); dropped"
			rm -f "$out/w4_$s.$v.moeb"
			grep -v "^w4_$s.$v " "$out/cases.txt" > "$out/cases.tmp" && mv "$out/cases.tmp" "$out/cases.txt"
		fi
	done
done
du -sh "$out"

#!/bin/sh
# gacc_ab.sh — the A/B of group sums (--debug=bq-gacc; issue 13, session 33) on
# the H200, in two steps:
#
#   sh bench/quant/gacc_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd), reference sets, DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                                on the GPU, from the root of a checkout
#
# Arms (sm_90a, --max-tokens=16, --cubin; full-size layers with synthetic weights):
#   main   MAIN_MOEC, its default plan
#   gacc   MOEC --debug=bq-gacc: 4-bit integer B enters the mma as the lop3's M + u,
#          each group's f32 sums and A's row sums folded once a group and column
#          (docs/codegen.md, "Group sums")
# Cases: Mixtral-8x7B GPTQ int4 (make_decode.sh's config: u4 + zero points, groups of
# 128) and the dense W4A16 28672x8192 projection (i4, groups of 128), each main and
# gacc; their bf16 pairs and gpt-oss-20b MXFP4 (group sums do not apply to e2m1:
# main only) for the table.
# On the GPU (about 115 s, every moert call under `timeout 25`):
# 1. correctness before timing: the int4 quant fixtures (stream-K through
#    tests/gpu/qstream.tuning) against the exporter's outputs and the
#    interpreter's (moert test), both arms; the full-size gacc outputs against
#    main's on the same input (rel_l2: not the same bits, bf16 weight rounding);
# 2. interleaved rounds (ROUNDS, default 3; none started past 55 s) of moert
#    bench --graph, main and gacc alternating, medians;
# 3. decode_table.py (copy rate, us, GB/s and % of copy over the packed bytes,
#    vs bf16, each step alone), gpt-oss's if time is left; a short table last.
# Writes $OUT/qdq/{same.txt,decode.txt,ab.txt,table.txt}.
set -u
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	cfg() {	# cfg MODEL NAME QUANT_JSON ("" drops quantization_config)
		mkdir -p "$tmp/$2"
		python3 - "$src/models/$1/config.json" "$tmp/$2/config.json" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("quantization_config", None)
c["torch_dtype"] = c["dtype"] = "bfloat16"
if sys.argv[3]:
    c["quantization_config"] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
	}
	cfg mixtral-8x7b mixtral-gptq '{"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false,
		"sym": true, "checkpoint_format": "gptq", "modules_to_not_convert": ["gate"]}'
	cfg mixtral-8x7b mixtral-bf16 ""
	cfg gpt-oss-20b gptoss-bf16 ""
	one() {	# one FILE MOEC MODEL [flags...]: DIR/FILE.xz
		f=$1 m=$2 model=$3
		shift 3
		"$m" compile "$model" "$@" --arch=sm_90a --max-tokens=16 --cubin -o "$tmp/$f" >"$tmp/log" 2>&1 ||
			{ tail -5 "$tmp/log"; exit 1; }
		xz -9 -c "$tmp/$f" >"$dir/$f.xz"
		echo "ok   $f ($(wc -c <"$tmp/$f") bytes, xz $(wc -c <"$dir/$f.xz"))"
	}
	syn="--layer 0 --synthetic-weights=1"
	one main.mixtral_gptq.moeb "$mmoec" "$tmp/mixtral-gptq/config.json" $syn
	one gacc.mixtral_gptq.moeb "$moec" "$tmp/mixtral-gptq/config.json" $syn --debug=bq-gacc
	one main.mixtral_bf16.moeb "$mmoec" "$tmp/mixtral-bf16/config.json" $syn
	one main.gptoss_mxfp4.moeb "$mmoec" "$src/models/gpt-oss-20b" $syn
	one main.gptoss_bf16.moeb "$mmoec" "$tmp/gptoss-bf16/config.json" $syn
	one main.w4_28k.moeb "$mmoec" "$src/bench/quant/dense_w4a16.ir"
	one gacc.w4_28k.moeb "$moec" "$src/bench/quant/dense_w4a16.ir" --debug=bq-gacc
	one main.bf16_28k.moeb "$mmoec" "$src/bench/quant/dense_bf16.ir"
	# without the flag this tree's bundles are main's (the default is unchanged)
	"$moec" compile "$tmp/mixtral-gptq/config.json" $syn --arch=sm_90a --max-tokens=16 --cubin -o "$tmp/x.moeb" \
		>/dev/null 2>&1 && xz -d -c "$dir/main.mixtral_gptq.moeb.xz" | cmp -s - "$tmp/x.moeb" &&
		echo "ok   MOEC without the flag: Mixtral GPTQ's bundle is MAIN_MOEC's, byte for byte" ||
		echo "NOTE MOEC without the flag: Mixtral GPTQ's bundle differs from MAIN_MOEC's"
	# the int4 quant fixtures, stream-K through qstream.tuning, and the interpreter's outputs
	for n in mixtral_gptq_sym qwen3_moe_awq llama_ct_int4_asym; do
		fx=$src/tests/fixtures/quant/$n
		for arm in main gacc; do
			m=$moec fl=--debug=bq-gacc
			[ $arm = main ] && m=$mmoec fl=
			# shellcheck disable=SC2086
			one fx_$arm.$n.moeb "$m" "$fx" --layer 1 --tuning="$src/tests/gpu/qstream.tuning" $fl
		done
		mkdir -p "$dir/ref.$n"
		for set in "$fx"/test_data_set_*/; do
			set=${set%/}
			"$moec" run "$fx" --layer 1 --compiled --test-data="$set" -o "$dir/ref.$n/${set##*/}" >/dev/null ||
				{ echo "FAIL the interpreter on $n"; exit 1; }
		done
	done
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "qdq: expect about 115 s (at most 120)"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/qdq
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$here"/*.moeb.xz; do xz -d -c "$f" >"$tmp/$(basename "$f" .xz)" || exit 1; done
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout 25 "$tmp/moert" "$@"; }
echo "moert built at $(el) s"

# 1. correctness
: >"$o/same.txt"
: >"$tmp/bad"
worst() { grep -o 'rel_l2 [0-9.e+-]*' "$1" | sort -k2 -g | tail -1 | cut -d' ' -f2; }
for n in mixtral_gptq_sym qwen3_moe_awq llama_ct_int4_asym; do
	for arm in main gacc; do
		b=$tmp/fx_$arm.$n.moeb
		M test "$b" "tests/fixtures/quant/$n" >"$tmp/t1" 2>&1 && r1=ok || r1=FAIL
		M test "$b" "$here/ref.$n" >"$tmp/t2" 2>&1 && r2=ok || r2=FAIL
		echo "fixture $n $arm exporter=$r1 rel_l2=$(worst "$tmp/t1") interpreter=$r2 rel_l2=$(worst "$tmp/t2")" |
			tee -a "$o/same.txt"
		[ $arm = main ] && m1=$r1 m2=$r2	# gacc is wrong where it fails and main passes
		[ $r1 = ok ] && [ $r2 = ok ] || grep -v '^ok' "$tmp/t1" "$tmp/t2" | head -6 >>"$o/same.txt"
		if [ $arm = gacc ] && ! { { [ $r1 = ok ] || [ $m1 = FAIL ]; } && { [ $r2 = ok ] || [ $m2 = FAIL ]; }; }; then
			echo gacc >>"$tmp/bad"
		fi
	done
done
echo "fixtures done at $(el) s"
# full size: gacc against main on the same input (x: T=16 rows, uniform in [-1, 1])
for c in mixtral_gptq:4096 w4_28k:8192; do
	n=${c%%:*} H=${c#*:}
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (16, $H)).astype(np.float32))" || exit 1
	for arm in main gacc; do
		rm -rf "$tmp/o.$arm"; mkdir -p "$tmp/o.$arm"
		M run "$tmp/$arm.$n.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$arm" >/dev/null 2>"$tmp/err" ||
			echo "same $n $arm FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
	done
	python3 - "$tmp/o.main/y.npy" "$tmp/o.gacc/y.npy" "$n" >>"$o/same.txt" <<'PY' || echo gacc >>"$tmp/bad"
import sys
import numpy as np
try:
    a = np.load(sys.argv[1]).astype(np.float64); b = np.load(sys.argv[2]).astype(np.float64)
except Exception as e:
    print("same %s gacc vs main: %s FAILED" % (sys.argv[3], e)); sys.exit(1)
d = np.abs(a - b)
rel = float(np.sqrt((d * d).sum() / max((a * a).sum(), 1e-30)))
ok = a.shape == b.shape and np.isfinite(b).all() and rel < 1e-2 and float((a != 0).mean()) > 0.5
print("same %s gacc vs main: max_abs=%.3g rel_l2=%.3g nonzero=%.3f %s" % (sys.argv[3], d.max(), rel,
      float((a != 0).mean()), "ok (bf16 weight rounding apart)" if ok else "DIFFERENT"))
sys.exit(0 if ok else 1)
PY
done
cat "$o/same.txt"
echo "correctness done at $(el) s"
grep -q gacc "$tmp/bad" && { echo "gacc arm WRONG: not timed"; exit 1; }

# 2. interleaved rounds, the arms' order alternating
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-3}" ] && [ "$(el)" -lt 55 ]; do
	for n in mixtral_gptq w4_28k; do
		arms="main gacc"
		[ $((r % 2)) = 0 ] && arms="gacc main"
		line="ab $n T=16 round=$r"
		for a in $arms; do
			us=$(M bench "$tmp/$a.$n.moeb" --tokens=16 --graph --iters=200 --warmup=20 2>&1 |
				sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
			line="$line $a=${us:-FAILED}"
		done
		echo "$line" | tee -a "$o/ab.txt"
	done
	r=$((r + 1))
done
echo "rounds done at $(el) s"
# 3. the decode table (make_decode.sh's cases.txt format: name bundle pair)
printf '%s\n' "mixtral_gptq main.mixtral_gptq.moeb mixtral_bf16" "mixtral_gptq.gacc gacc.mixtral_gptq.moeb mixtral_bf16" \
	"mixtral_bf16 main.mixtral_bf16.moeb -" "w4_28k main.w4_28k.moeb bf16_28k" "w4_28k.gacc gacc.w4_28k.moeb bf16_28k" \
	"bf16_28k main.bf16_28k.moeb -" >"$tmp/cases.txt"
left() { l=$(($1 - $(el))); [ "$l" -gt 5 ] && echo "$l" || echo 5; }	# seconds to the mark $1
TMPDIR=$tmp timeout "$(left 105)" python3 bench/quant/decode_table.py "$tmp/moert" "$tmp" 16 >"$o/decode.txt" 2>&1
echo "decode table done at $(el) s"
if [ "$(el)" -lt 95 ]; then
	printf '%s\n' "gptoss_mxfp4 main.gptoss_mxfp4.moeb gptoss_bf16" "gptoss_bf16 main.gptoss_bf16.moeb -" >"$tmp/cases.txt"
	TMPDIR=$tmp timeout "$(left 116)" python3 bench/quant/decode_table.py "$tmp/moert" "$tmp" 16 >"$o/decode_gptoss.txt" 2>&1
	echo "gpt-oss table done at $(el) s"
fi

{
	echo "== correctness"; cat "$o/same.txt"
	echo "== decode table (T=16; % of copy over the packed bytes)"
	grep -hE "^copy rate|: T=16 |^FAIL" "$o/decode.txt" "$o/decode_gptoss.txt" 2>/dev/null
	sed -n '/^steps alone/,$p' "$o/decode.txt"
	[ -f "$o/decode_gptoss.txt" ] && sed -n '/^steps alone/,$p' "$o/decode_gptoss.txt"
	echo "== interleaved rounds (moert bench --graph, 200 iters, median us)"
	awk '{for (i = 5; i <= NF; i++) {split($i, kv, "="); v[$2 " " kv[1]] = v[$2 " " kv[1]] " " kv[2]}}
		END {for (k in v) print k ":" v[k]}' "$o/ab.txt" | sort |
		python3 -c "
import sys, statistics
for l in sys.stdin:
    k, vs = l.split(':')
    xs = [float(x) for x in vs.split() if x != 'FAILED']
    print('%-22s median %8.1f us  rounds %s' % (k, statistics.median(xs) if xs else float('nan'), vs.strip()))"
} >"$o/table.txt"
cat "$o/table.txt"
echo "qdq done at $(el) s"

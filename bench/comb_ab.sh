#!/bin/sh
# comb_ab.sh — the A/B of the non-GEMM steps of MoE prefill (issue 12, session
# 35) on the H200, in two steps:
#
#   sh bench/comb_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd), DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                          on the GPU, from the root of a checkout
#
# Arms (sm_90a, --cubin, full-size layers with synthetic weights; the bf16
# blocks of DeepSeek-V3 and gpt-oss: their configs without quantization_config):
#   main   MAIN_MOEC, its default plan
#   r64    MOEC without flags: dense prefill GEMMs of few columns on 64-row
#          tiles (program.c rows64_prefill; Qwen3-30B-A3B's router, 32 -> 64
#          CTAs at T = 4096); only Qwen3's T = 4096 bundle differs from main's
#          (since the flip after this A/B, MOEC's bundles round the slots too:
#          build MOEC with SLOTS_REF_DEFAULT 0 in passes/lower_moe.c for r64)
#   sref   MOEC --debug=slots-ref: the moe slots rounded to bf16 after the
#          routing weight where transformers' block rounds them (Mixtral,
#          Qwen3-MoE, gpt-oss; docs/passes.md, lower-moe), the combine
#          summing 2-byte slots in f32; with r64's router
#   hub    DeepSeek-V3 only: MAIN_MOEC on the block's IR with the router weight
#          bf16, as the hub's checkpoint holds it (synthetic weights make it
#          f32, which split-f32 runs as three bf16 GEMMs over K = 3 x 7168: the
#          bench's 108 us router; a bf16 checkpoint compiles to one GEMM with
#          f32 logits, the same graph but for the weight's dtype)
# Cases: Qwen3-30B-A3B T = 4096 (main r64 sref) and T = 16 (main sref: decode),
# Mixtral-8x7B and gpt-oss-20b T = 4096 (main sref), DeepSeek-V3 bf16 T = 4096
# (main, hub, r64 = MOEC on hub's IR: its bf16 router on 64-row tiles, 128
# CTAs).  prepare checks that DeepSeek-V3's bundle under slots-ref is main's
# byte for byte (its block keeps f32 slots, as transformers' does).
# On the GPU (about 100 s, every moert call under `timeout 25`):
# 1. correctness before timing: the interpreter's y (f32 slots) at T = 128 /
#    80 against every Qwen3 / gpt-oss arm (moert test; FAIL marks, not gates);
#    every arm's y against main's on the same x
#    (uniform in [-1, 1], T rows): r64 the same bits (DeepSeek-V3's against
#    hub's); sref rel_l2 < 1e-2 (session 30 measured 1.1e-3 for Qwen3; bf16
#    rounding of each slot); hub only finite and written (other weights);
# 2. interleaved rounds (ROUNDS, default 3; none started past 70 s) of moert
#    bench --graph, the arms' order rotating, medians (DeepSeek-V3: 20 iters);
# 3. one --profile per arm of each T = 4096 case (each step alone): the
#    router (k0), the down GEMM (k4) and the combine (k7, DeepSeek-V3's k9),
#    while time is left;
#    a short table last.
# Writes $OUT/comb/{same.txt,ab.txt,prof.*.txt,table.txt}.
# CPU check of the flow: CUBIN= (PTX only) prepare into another DIR, then
# MOERT_LIBCUDA=build/tests/gpu/libfakecuda.so FAKECUDA_ANY=1 OUT=... sh DIR/run.sh
# (the stand-in driver JITs no cubin and its kernels write nothing).
set -u
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" "$tmp/ds" "$tmp/go" || exit 1
	python3 "$src/bench/bf16_config.py" "$src/models/deepseek-v3/config.json" "$tmp/ds/config.json" || exit 1
	python3 "$src/bench/bf16_config.py" "$src/models/gpt-oss-20b/config.json" "$tmp/go/config.json" || exit 1
	model() {	# model CASE: the config and layer
		case $1 in
		q3*) echo "$src/models/qwen3-30b-a3b/config.json 0" ;;
		mx*) echo "$src/models/mixtral-8x7b/config.json 0" ;;
		go*) echo "$tmp/go/config.json 0" ;;
		ds*) echo "$tmp/ds/config.json 3" ;;
		esac
	}
	comp() {	# comp OUT MOEC CASE TOKENS [flags...]
		o=$1 m=$2 c=$3 tk=$4
		shift 4
		# shellcheck disable=SC2046
		set -- $(model "$c") "$@"	# the config and layer as two words
		cfg=$1 layer=$2
		shift 2
		"$m" compile "$cfg" --layer "$layer" --synthetic-weights=1 --arch=sm_90a --max-tokens="$tk" \
			${CUBIN---cubin} -q "$@" -o "$o" >"$tmp/log" 2>&1 || { tail -5 "$tmp/log"; exit 1; }
	}
	ship() {	# ship ARM CASE TOKENS MOEC [flags...]: DIR/ARM.CASE.moeb.xz
		a=$1 c=$2 tk=$3 m=$4
		shift 4
		comp "$tmp/$a.$c.moeb" "$m" "$c" "$tk" "$@"
		xz -9 -c "$tmp/$a.$c.moeb" >"$dir/$a.$c.moeb.xz"
		echo "ok   $a.$c ($(wc -c <"$tmp/$a.$c.moeb") bytes, xz $(wc -c <"$dir/$a.$c.moeb.xz"))"
	}
	: >"$dir/cases.txt"
	for ct in q3_4096:4096 q3_16:16 mx_4096:4096 go_4096:4096; do
		c=${ct%%:*} tk=${ct#*:}
		ship main "$c" "$tk" "$mmoec"
		arms=main
		comp "$tmp/r64.$c.moeb" "$moec" "$c" "$tk"
		if cmp -s "$tmp/r64.$c.moeb" "$tmp/main.$c.moeb"; then
			echo "ok   r64.$c is main's bundle, byte for byte: not run"
		else
			ship r64 "$c" "$tk" "$moec"
			arms="$arms r64"
		fi
		ship sref "$c" "$tk" "$moec" --debug=slots-ref
		arms="$arms sref"
		echo "$c $tk $arms" >>"$dir/cases.txt"
	done
	# DeepSeek-V3 as the hub's bf16 router weight compiles: its IR with the
	# weight bf16 and no cast of h to f32 (cfg_router's path for a bf16 weight
	# under F32_KEEP: f32 logits, never rounded)
	"$mmoec" import "$tmp/ds/config.json" --layer 3 --synthetic-weights=1 -o "$tmp/ds.ir" || exit 1
	sed -e 's/^\(weight \$model.layers.3.mlp.gate.weight : \)f32/\1bf16/' -e '/%mlp.gate.in = cast %h, to=f32/d' \
		-e 's/matmul %mlp.gate.in, /matmul %h, /' "$tmp/ds.ir" >"$tmp/dsbf.ir"
	grep -q '^weight $model.layers.3.mlp.gate.weight : bf16' "$tmp/dsbf.ir" && ! grep -q 'mlp.gate.in' "$tmp/dsbf.ir" ||
		{ echo "FAIL DeepSeek-V3's IR: the router edit did not apply"; exit 1; }
	ship main ds_4096 4096 "$mmoec"
	for a in hub r64; do
		m=$mmoec
		[ $a = r64 ] && m=$moec
		"$m" compile "$tmp/dsbf.ir" --arch=sm_90a --max-tokens=4096 ${CUBIN---cubin} -q -o "$tmp/$a.ds_4096.moeb" \
			>"$tmp/log" 2>&1 || { tail -5 "$tmp/log"; exit 1; }
		xz -9 -c "$tmp/$a.ds_4096.moeb" >"$dir/$a.ds_4096.moeb.xz"
		echo "ok   $a.ds_4096 ($(wc -c <"$tmp/$a.ds_4096.moeb") bytes, xz $(wc -c <"$dir/$a.ds_4096.moeb.xz"))"
	done
	echo "ds_4096 4096 main hub r64" >>"$dir/cases.txt"
	# the interpreter's outputs (f32 slots: the moe op's own semantics) at full
	# size, Qwen3 at T = 128 and gpt-oss at T = 80 (prefill variants; the
	# inputs are made again on the device by bf16_input.py, seed 11)
	for cth in q3:128:2048 go:80:2880; do
		c=${cth%%:*} th=${cth#*:}
		tk=${th%%:*} H=${th#*:}
		# shellcheck disable=SC2046
		set -- $(model "$c")	# the config and layer
		mkdir -p "$tmp/in.$c" "$dir/ref.$c"
		python3 "$src/tests/gpu/bf16_input.py" "$tmp/in.$c" "$tk" "$H" 11 || exit 1
		"$moec" run "$1" --layer "$2" --synthetic-weights=1 --test-data="$tmp/in.$c" \
			-o "$dir/ref.$c/test_data_set_0" -q >/dev/null || { echo "FAIL the interpreter on $c"; exit 1; }
		rm -f "$dir/ref.$c/test_data_set_0/input_0.pb"
		echo "ok   ref.$c: the interpreter's y at T=$tk ($(du -sk "$dir/ref.$c" | cut -f1) KB)"
	done
	# DeepSeek-V3 (f32 slots in its reference): both arms main's bundle
	comp "$tmp/sref.ds.moeb" "$moec" ds 4096 --debug=slots-ref
	cmp -s "$tmp/main.ds_4096.moeb" "$tmp/sref.ds.moeb" &&
		echo "ok   DeepSeek-V3 T=4096: MOEC --debug=slots-ref is MAIN_MOEC's bundle, byte for byte" ||
		{ echo "FAIL DeepSeek-V3 T=4096: MOEC --debug=slots-ref differs from MAIN_MOEC"; exit 1; }
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "comb: expect about 100 s (at most 110)"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/comb
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$here"/*.moeb.xz; do xz -d -c "$f" >"$tmp/$(basename "$f" .xz)" || exit 1; done
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout 25 "$tmp/moert" "$@"; }
echo "moert built at $(el) s"

# 1. correctness: each arm's y against main's on the same x
: >"$o/same.txt"
: >"$tmp/bad"
while read -r c tk arms; do
	case $c in q3*) H=2048 ;; mx*) H=4096 ;; go*) H=2880 ;; ds*) H=7168 ;; esac	# hidden_size
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, ($tk, $H)).astype(np.float32))" ||
		exit 1
	for a in $arms; do
		rm -rf "$tmp/o.$a"; mkdir -p "$tmp/o.$a"
		M run "$tmp/$a.$c.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >/dev/null 2>"$tmp/err" ||
			echo "same $c $a run FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
	done
	for a in $arms; do
		[ "$a" = main ] && continue
		bound=1e-2 ref=main
		[ "$a" = r64 ] && bound=0
		[ "$a" = hub ] && bound=info	# other router weights: not compared
		[ "$a" = r64 ] && [ "$c" = ds_4096 ] && ref=hub
		python3 - "$tmp/o.$ref/y.npy" "$tmp/o.$a/y.npy" "$c" "$a" "$bound" "$ref" <<'PY' >>"$o/same.txt" || echo "$c $a" >>"$tmp/bad"
import sys
import numpy as np
c, a, ref = sys.argv[3], sys.argv[4], sys.argv[6]
bound = -1.0 if sys.argv[5] == "info" else float(sys.argv[5])
try:
    m = np.load(sys.argv[1]); b = np.load(sys.argv[2])
except Exception as e:
    print("same %s %s vs %s: %s FAILED" % (c, a, ref, e)); sys.exit(1)
same = m.shape == b.shape and m.tobytes() == b.tobytes()
m = m.astype(np.float64); b = b.astype(np.float64)
d = np.abs(m - b)
rel = float(np.sqrt((d * d).sum() / max((m * m).sum(), 1e-30)))
# main's y must be a real output (a run that wrote nothing would compare equal)
ok = (m.shape == b.shape and np.isfinite(b).all() and float((m != 0).mean()) > 0.5 and
      float((b != 0).mean()) > 0.5 and (same if bound == 0 else bound < 0 or rel < bound))
print("same %s %s vs %s: %s max_abs=%.3g rel_l2=%.3g bound=%s %s" % (c, a, ref, "same bits" if same else "differ",
      d.max(), rel, "same bits" if bound == 0 else sys.argv[5], "ok" if ok else "WRONG"))
sys.exit(0 if ok else 1)
PY
	done
done <"$here/cases.txt"
# against the interpreter's f32 slots at full size (Qwen3 T = 128, gpt-oss T = 80)
worst() { grep -o 'rel_l2 [0-9.e+-]*' "$1" | sort -k2 -g | tail -1 | cut -d' ' -f2; }
for cth in q3:128:2048 go:80:2880; do
	c=${cth%%:*} th=${cth#*:}
	tk=${th%%:*} H=${th#*:}
	[ -d "$here/ref.$c" ] || continue
	cp -r "$here/ref.$c" "$tmp/ref.$c" && python3 tests/gpu/bf16_input.py "$tmp/ref.$c/test_data_set_0" "$tk" "$H" 11 ||
		exit 1
	for a in main r64 sref; do
		[ -f "$tmp/$a.${c}_4096.moeb" ] || continue
		M test "$tmp/$a.${c}_4096.moeb" "$tmp/ref.$c" >"$tmp/t" 2>&1 && r=ok || r=FAIL
		echo "interp $c T=$tk $a: $r rel_l2=$(worst "$tmp/t") ($(tail -1 "$tmp/t"))" >>"$o/same.txt"
	done
done
cat "$o/same.txt"
echo "correctness done at $(el) s"

# 2. interleaved rounds, the arms' order rotating; arms found wrong are not timed
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-3}" ] && [ "$(el)" -lt 65 ]; do
	while read -r c tk arms; do
		set -- $arms
		i=0
		while [ $i -lt $((r - 1)) ]; do a=$1; shift; set -- "$@" "$a"; i=$((i + 1)); done
		it=40
		[ "$tk" -le 64 ] && it=200
		[ "$c" = ds_4096 ] && it=20
		line="ab $c T=$tk round=$r"
		for a in "$@"; do
			grep -qx "$c $a" "$tmp/bad" && continue
			us=$(M bench "$tmp/$a.$c.moeb" --tokens="$tk" --graph --iters=$it --warmup=10 2>&1 |
				sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
			line="$line $a=${us:-FAILED}"
		done
		echo "$line" | tee -a "$o/ab.txt"
	done <"$here/cases.txt"
	r=$((r + 1))
done
echo "rounds done at $(el) s"

# 3. each step alone, T = 4096 cases, while time is left
while read -r c tk arms; do
	[ "$tk" -gt 64 ] || continue
	for a in $arms; do
		[ "$(el)" -lt 92 ] || break 2
		M bench "$tmp/$a.$c.moeb" --tokens="$tk" --graph --iters=20 --warmup=5 --profile >"$o/prof.$a.$c.txt" 2>&1
	done
done <"$here/cases.txt"
echo "profiles done at $(el) s"

{
	echo "== correctness (y against main's on the same x)"; cat "$o/same.txt"
	echo "== interleaved rounds (moert bench --graph, median us; ratio to main, DeepSeek-V3's r64 to hub)"
	python3 - "$o/ab.txt" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    for kv in f[4:]:
        a, _, us = kv.partition("=")
        if us != "FAILED":
            v[(f[1], f[2], a)].append(float(us))
for (c, t, a) in sorted(v):
    base = "hub" if c.startswith("ds") and a == "r64" else "main"	# r64's DeepSeek-V3 is hub's IR
    med = statistics.median(v[(c, t, a)]); m = v.get((c, t, base))
    r = med / statistics.median(m) if m else float("nan")
    print("%-8s %-7s %-5s median %9.1f us  %.3fx %-4s rounds %s" % (c, t, a, med, r, base, v[(c, t, a)]))
PY
	echo "== steps alone (us; --profile, one run each)"
	for f in "$o"/prof.*.txt; do
		[ -f "$f" ] || continue
		n=${f##*/prof.}
		awk -v n="${n%.txt}" '/^profile/ {on = 1; next} on && NF == 3 && $1 != "sum" {s = s " " $1 "=" $2}
			END {print n ":" s}' "$f" | sed 's/[a-z0-9_]*_layer[0-9]*_//g'
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "comb done at $(el) s"

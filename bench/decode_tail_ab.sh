#!/bin/sh
# decode_tail_ab.sh — the A/B of issue 12's decode GEMMs (session 34): stream-K
# with a tail of short runs (--debug=sk-tail, bit 44) and tuning-table tiles for
# the short-K downs, on the H200, in two steps:
#
#   sh bench/decode_tail_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd), DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                                 on the GPU, from the root of a checkout
#
# Arms (sm_90a, --max-tokens=16, --cubin; make_bench.sh's full-size layers with
# synthetic weights):
#   main   MAIN_MOEC, its default plan
#   tail   MOEC --debug=sk-tail: every static bf16 stream-K GEMM on twice the
#          CTAs, the first wave's runs 6x the second's (docs/codegen.md,
#          "Stream-K with a tail")
#   tw3 tw12  Qwen3-30B-A3B's gate|up and down with other tails, through
#          bench/qwen3_tail_w{3,12}.tuning (.p264.t132w3: a quarter of the pairs in
#          short runs; .p396.t264w12: two short runs a slot, half as long as the flag's)
#   t256 n64 k64   Qwen3-30B-A3B's down at T 2..16 through bench/down_*.tuning
#          (16x256x128 8 warps 3 stages; 16x64x128 2 an SM; 16x128x64 2 an SM)
#   g192   gpt-oss-20b's down through bench/gptoss_down192.tuning (16x192x64, 1 an SM)
# Cases: qwen3_T16 (all but g192), gptoss_T16 (main tail g192), mixtral_T16 and
# dense_M16 (main tail).
# On the GPU (about 100 s, every moert call under `timeout 25`):
# 1. correctness before timing: every arm's y against main's on the same x
#    (T = 16, uniform in [-1, 1]): the same bits, or rel_l2 under 5e-3 (other
#    tiles or cuts sum the f32 partials in another grouping; bf16 output);
#    an arm over the bound is not timed;
# 2. interleaved rounds (ROUNDS, default 3; none started past 60 s) of
#    moert bench --graph (200 iterations, medians), the arms' order rotating;
#    Qwen3 skewed (skew 80) main and tail once a round if time is left;
# 3. each step alone (--profile) once an arm; the GEMM steps (k3, k4) listed;
# 4. a short table last.  Writes $OUT/qdec/{same.txt,ab.txt,prof.txt,table.txt}.
set -u
cases='qwen3_T16:2048:main,tail,tw3,tw12,t256,n64,k64 gptoss_T16:2880:main,tail,g192 mixtral_T16:4096:main,tail dense_M16:4096:main,tail'
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" "$tmp/gptoss" || exit 1
	python3 "$src/bench/bf16_config.py" "$src/models/gpt-oss-20b/config.json" "$tmp/gptoss/config.json" || exit 1
	model() {	# model CASE: the compile arguments
		case $1 in
		qwen3_T16) echo "$src/models/qwen3-30b-a3b/config.json --layer 0 --synthetic-weights=1" ;;
		gptoss_T16) echo "$tmp/gptoss/config.json --layer 0 --synthetic-weights=1" ;;
		mixtral_T16) echo "$src/models/mixtral-8x7b/config.json --layer 0 --synthetic-weights=1" ;;
		dense_M16) echo "$src/bench/models/dense_up.ir" ;;
		esac
	}
	flags() {	# flags ARM: MOEC's flags for the arm
		case $1 in
		tail) echo "--debug=sk-tail" ;;
		t256|n64|k64) echo "--tuning=$src/bench/down_$1.tuning" ;;
		tw3|tw12) echo "--tuning=$src/bench/qwen3_tail_w${1#tw}.tuning" ;;
		g192) echo "--tuning=$src/bench/gptoss_down192.tuning" ;;
		esac
	}
	for c in $cases; do
		n=${c%%:*} arms=${c##*:}
		for a in $(echo "$arms" | tr , ' '); do
			m=$moec
			[ "$a" = main ] && m=$mmoec
			# shellcheck disable=SC2046
			"$m" compile $(model "$n") $(flags "$a") --arch=sm_90a --max-tokens=16 ${CUBIN---cubin} -v \
				-o "$tmp/$a.$n.moeb" >"$tmp/log" 2>&1 || { tail -5 "$tmp/log"; exit 1; }
			grep -q warning "$tmp/log" && { grep warning "$tmp/log"; exit 1; }	# a table entry not taken
			grep -E 'k3 on|k4 on|k0 on' "$tmp/log" | grep -v 't1-1' | sed "s/.*note: /  $a.$n: /"
			xz -9 -c "$tmp/$a.$n.moeb" >"$dir/$a.$n.moeb.xz"
			echo "ok   $a.$n ($(wc -c <"$tmp/$a.$n.moeb") bytes, xz $(wc -c <"$dir/$a.$n.moeb.xz"))"
		done
	done
	# without the flag this tree's bundles are main's (the default is unchanged)
	# shellcheck disable=SC2046
	"$moec" compile $(model qwen3_T16) --arch=sm_90a --max-tokens=16 ${CUBIN---cubin} -o "$tmp/x.moeb" >/dev/null 2>&1 &&
		cmp -s "$tmp/x.moeb" "$tmp/main.qwen3_T16.moeb" &&
		echo "ok   MOEC without the flag: Qwen3's bundle is MAIN_MOEC's, byte for byte" ||
		echo "NOTE MOEC without the flag: Qwen3's bundle differs from MAIN_MOEC's"
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "qdec: expect about 100 s (at most 110)"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/qdec
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
for c in $cases; do
	n=${c%%:*} rest=${c#*:}
	H=${rest%%:*} arms=${rest#*:}
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (16, $H)).astype(np.float32))" || exit 1
	for a in $(echo "$arms" | tr , ' '); do
		rm -rf "$tmp/o.$a"; mkdir -p "$tmp/o.$a"
		M run "$tmp/$a.$n.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >/dev/null 2>"$tmp/err" ||
			echo "same $n $a FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
		[ "$a" = main ] && continue
		python3 - "$tmp/o.main/y.npy" "$tmp/o.$a/y.npy" "$n" "$a" >>"$o/same.txt" <<'PY' || echo "$n.$a" >>"$tmp/bad"
import sys
import numpy as np
n, a = sys.argv[3], sys.argv[4]
try:
    x = np.load(sys.argv[1]).astype(np.float64); y = np.load(sys.argv[2]).astype(np.float64)
except Exception as e:
    print("same %s %s vs main: %s FAILED" % (n, a, e)); sys.exit(1)
if x.shape != y.shape:
    print("same %s %s vs main: shapes %s %s DIFFERENT" % (n, a, x.shape, y.shape)); sys.exit(1)
d = np.abs(x - y)
rel = float(np.sqrt((d * d).sum() / max((x * x).sum(), 1e-30)))
bits = bool((x == y).all())
ok = np.isfinite(y).all() and rel < 5e-3 and float((x != 0).mean()) > 0.5
print("same %s %s vs main: %s max_abs=%.3g rel_l2=%.3g differing=%.4f %s" % (n, a, "same bits" if bits else "not the same bits",
      d.max(), rel, float((x != y).mean()), "ok" if ok else "DIFFERENT"))
sys.exit(0 if ok else 1)
PY
	done
done
cat "$o/same.txt"
echo "correctness done at $(el) s"

# 2. interleaved rounds (arms over the bound are left out)
: >"$o/ab.txt"
bench() {	# bench ARM CASE SKEW: the median us
	M bench "$tmp/$1.$2.moeb" --tokens=16 --graph --iters=200 --warmup=20 --skew="$3" 2>&1 |
		sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p'
}
r=1
while [ "$r" -le "${ROUNDS:-3}" ] && [ "$(el)" -lt 60 ]; do
	for c in $cases; do
		n=${c%%:*} arms=$(echo "${c##*:}" | tr , ' ')
		k=$(( (r - 1) % $(echo "$arms" | wc -w) ))	# rotate the order
		set -- $arms
		i=0; while [ $i -lt "$k" ]; do a=$1; shift; set -- "$@" "$a"; i=$((i + 1)); done
		line="ab $n T=16 skew=0 round=$r"
		for a in "$@"; do
			grep -qx "$n.$a" "$tmp/bad" && continue
			us=$(bench "$a" "$n" 0)
			line="$line $a=${us:-FAILED}"
		done
		echo "$line" | tee -a "$o/ab.txt"
	done
	if [ "$(el)" -lt 60 ] && ! grep -qx qwen3_T16.tail "$tmp/bad"; then
		line="ab qwen3_T16 T=16 skew=80 round=$r"
		for a in main tail; do us=$(bench "$a" qwen3_T16 80); line="$line $a=${us:-FAILED}"; done
		echo "$line" | tee -a "$o/ab.txt"
	fi
	r=$((r + 1))
done
echo "rounds done at $(el) s"

# 3. each step alone, once an arm: the GEMMs
: >"$o/prof.txt"
for c in $cases; do
	n=${c%%:*}
	for a in $(echo "${c##*:}" | tr , ' '); do
		[ "$(el)" -lt 100 ] || break
		grep -qx "$n.$a" "$tmp/bad" && continue
		M bench "$tmp/$a.$n.moeb" --tokens=16 --graph --iters=100 --warmup=10 --profile 2>&1 |
			awk -v tag="$n $a" '/^profile/ {on = 1; next}
				on && NF == 3 && $1 != "sum" && $1 != "memset" {printf "prof %s %s %s\n", tag, $1, $2}' |
			tee -a "$o/prof.txt"
	done
done
echo "profiles done at $(el) s"

{
	echo "== correctness (y against main's, T = 16; bound rel_l2 5e-3)"; cat "$o/same.txt"
	echo "== interleaved rounds (moert bench --graph, 200 iters, median us; x main)"
	python3 - "$o/ab.txt" <<'PY'
import sys, statistics, collections
v = collections.defaultdict(list)
order = []
for l in open(sys.argv[1]):
    w = l.split()
    key = (w[1], w[3])
    for kv in w[5:]:
        a, us = kv.split("=")
        if us != "FAILED":
            v[key, a].append(float(us))
        if (key, a) not in order:
            order.append((key, a))
med = {k: statistics.median(x) for k, x in v.items() if x}
for (key, a) in order:
    if (key, a) not in med:
        print("%-12s %-8s %-5s FAILED" % (key[0], key[1], a)); continue
    m = med.get((key, "main"))
    print("%-12s %-8s %-5s %8.1f us  %s  rounds %s" % (key[0], key[1], a, med[key, a],
          "%.3fx" % (med[key, a] / m) if m else "", " ".join("%.1f" % x for x in v[key, a])))
PY
	echo "== steps alone (us): the expert GEMMs"
	grep -E '_k[34] |_k0 ' "$o/prof.txt" | awk '{printf "%-12s %-5s %-28s %s\n", $2, $3, $4, $5}'
} >"$o/table.txt"
cat "$o/table.txt"
echo "qdec done at $(el) s"

#!/bin/sh
# tiles_ab.sh — the A/B of MoE prefill tile plans at T = 4096 on the H200
# (issue 12, session 34), in two steps:
#
#   sh bench/tiles_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd) and DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                           on the GPU, from the root of a checkout
#
# make_bench.sh's compile lines (full-size layers, synthetic weights, sm_90a,
# --max-tokens=4096) plus --cubin; each case's main arm by MAIN_MOEC:
#   gptoss   main | pers  bench/gptoss_pers.tuning: only the down persistent over 132 CTAs
#   deepseek main | wgw   --debug=wg-wide: the shared expert's dense GEMMs (k5, k6) on 64x256 warpgroups
#   mixtral  main | gpp   --debug=gather-pingpong: the gathered gate|up (k3, 64 k-tiles) ping-pong 128x128
#                 | wide  bench/mixtral_k3wide.tuning: k3 cooperative on 64x256 warpgroups
#                 | gppw  both: k3 ping-pong 64x256 a warpgroup
#   qwen3    main | gpp   --debug=gather-pingpong (k3, 32 k-tiles)
#                 | k4w   bench/qwen3_k4wide.tuning: the down (k4) ping-pong 64x256 a warpgroup
#                 | gk4w  both
# On the GPU (about 100 s, every moert call under `timeout`):
# 1. correctness before timing: each arm's y against main's on the same input
#    (x uniform in [-1, 1], T = 4096, `moert run`): the same bits expected
#    (every arm sums each output over the same k-steps in the same order); an
#    arm that differs is reported DIFFERENT and not timed;
# 2. round 1: `moert bench --graph --profile` (the block's median, then each
#    step alone), then interleaved rounds of `moert bench --graph` (the arms'
#    order alternating) while time is left (none started past RUN_S, default 80 s;
#    no moert call past HARD_S, default 100 s; timeouts: run 12 s, profile 25, bench 15);
# 3. a table last: per case and arm the block's median over the rounds, against
#    main, and the expert GEMMs' steps alone.
# Writes $OUT/tiles/{same.txt,ab.txt,prof.*.txt,table.txt}.
set -u
cases="gptoss:2880:main,pers deepseek:7168:main,wgw mixtral:4096:main,gpp,wide,gppw qwen3:2048:main,gpp,k4w,gk4w"
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" "$tmp/gptoss" "$tmp/deepseek" || exit 1
	python3 "$src/bench/bf16_config.py" "$src/models/gpt-oss-20b/config.json" "$tmp/gptoss/config.json" || exit 1
	python3 "$src/bench/bf16_config.py" "$src/models/deepseek-v3/config.json" "$tmp/deepseek/config.json" || exit 1
	model() {	# model CASE: make_bench.sh's model and layer
		case $1 in
		gptoss) echo "$tmp/gptoss/config.json --layer 0" ;;
		deepseek) echo "$tmp/deepseek/config.json --layer 3" ;;
		mixtral) echo "$src/models/mixtral-8x7b/config.json --layer 0" ;;
		qwen3) echo "$src/models/qwen3-30b-a3b/config.json --layer 0" ;;
		esac
	}
	flags() {	# flags CASE ARM: the arm's moec flags over main's plan
		case $1.$2 in
		gptoss.pers) echo "--tuning=$src/bench/gptoss_pers.tuning" ;;
		deepseek.wgw) echo "--debug=wg-wide" ;;
		*.gpp) echo "--debug=gather-pingpong" ;;
		mixtral.wide) echo "--tuning=$src/bench/mixtral_k3wide.tuning" ;;
		mixtral.gppw) echo "--debug=gather-pingpong --tuning=$src/bench/mixtral_k3wide.tuning" ;;
		qwen3.k4w) echo "--tuning=$src/bench/qwen3_k4wide.tuning" ;;
		qwen3.gk4w) echo "--debug=gather-pingpong --tuning=$src/bench/qwen3_k4wide.tuning" ;;
		esac
	}
	for c in $cases; do
		n=${c%%:*} arms=${c##*:}
		for a in $(echo "$arms" | tr , ' '); do
			m=$moec
			[ "$a" = main ] && m=$mmoec
			# shellcheck disable=SC2046
			"$m" compile $(model "$n") --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 --cubin \
				$(flags "$n" "$a") -v -o "$tmp/$a.$n.moeb" >"$tmp/log" 2>&1 || { tail -5 "$tmp/log"; exit 1; }
			grep -E 'k[3-6] on sm_90a: tuning key .*t1025-4096' "$tmp/log" | sed 's/.*@/@/' >"$dir/$a.$n.plan"
			if [ "$a" != main ] && cmp -s "$tmp/$a.$n.moeb" "$tmp/main.$n.moeb"; then
				echo "FAIL $a.$n is main's bundle byte for byte (the arm changes nothing)"
				exit 1
			fi
			xz -9 -c "$tmp/$a.$n.moeb" >"$dir/$a.$n.moeb.xz"
			echo "ok   $a.$n ($(wc -c <"$tmp/$a.$n.moeb") bytes, xz $(wc -c <"$dir/$a.$n.moeb.xz"))"
		done
		# without the flags this tree's bundle is main's (the defaults are unchanged)
		# shellcheck disable=SC2046
		"$moec" compile $(model "$n") --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 --cubin \
			-o "$tmp/x.moeb" >/dev/null 2>&1 && cmp -s "$tmp/x.moeb" "$tmp/main.$n.moeb" &&
			echo "ok   MOEC without flags: $n's bundle is MAIN_MOEC's, byte for byte" ||
			echo "NOTE MOEC without flags: $n's bundle differs from MAIN_MOEC's"
	done
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "tiles: expect about 100 s"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/tiles
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$here"/*.moeb.xz; do xz -d -c "$f" >"$tmp/$(basename "$f" .xz)" || exit 1; done
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout "${TO:-15}" "$tmp/moert" "$@"; }	# a hang costs its timeout, not the call
echo "moert built at $(el) s"

# 1. correctness: y of each arm against main's, the same input
: >"$o/same.txt"
: >"$tmp/bad"
for c in $cases; do
	n=${c%%:*} h=${c#*:} arms=${c##*:}
	h=${h%%:*}
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (4096, $h)).astype(np.float32))" ||
		exit 1
	for a in $(echo "$arms" | tr , ' '); do
		rm -rf "$tmp/o.$a"
		TO=12 M run "$tmp/$a.$n.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >"$tmp/err" 2>&1 ||
			echo "same $n $a: moert run FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
		[ "$a" = main ] && continue
		python3 - "$tmp/o.main/y.npy" "$tmp/o.$a/y.npy" "$n" "$a" >>"$o/same.txt" <<'PY' || echo "$n.$a" >>"$tmp/bad"
import sys
import numpy as np
n, a = sys.argv[3], sys.argv[4]
try:
    x = np.load(sys.argv[1]); y = np.load(sys.argv[2])
except Exception as e:
    print("same %s %s vs main: %s FAILED" % (n, a, e)); sys.exit(1)
same = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
xf, yf = x.astype(np.float64), y.astype(np.float64)
d = np.abs(xf - yf) if x.shape == y.shape else np.array([np.inf])
ok = same and np.isfinite(xf).all() and float((xf != 0).mean()) > 0.5
print("same %s %s vs main: %s max_abs=%.3g nonzero=%.3f" % (n, a, "same bits" if ok else "DIFFERENT", d.max(),
      float((xf != 0).mean()) if x.size else 0))
sys.exit(0 if ok else 1)
PY
	done
	echo "correct $n done at $(el) s"
done
cat "$o/same.txt"

# 2. round 1 with the steps alone, then rounds while time is left
bench() {	# bench CASE ARM ROUND [flags]: one `moert bench --graph` line into ab.txt
	n=$1 a=$2 r=$3
	shift 3
	if grep -qx "$n.$a" "$tmp/bad"; then us=WRONG; elif [ "$(el)" -ge "${HARD_S:-100}" ]; then us=SKIPPED; else
		M bench "$tmp/$a.$n.moeb" --tokens=4096 --graph --iters="${ITERS:-50}" --warmup=10 "$@" >"$tmp/b" 2>&1
		us=$(sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p' "$tmp/b")
		[ $# -gt 0 ] && cp "$tmp/b" "$o/prof.$a.$n.txt"
	fi
	echo "ab $n arm=$a round=$r us=${us:-FAILED}" | tee -a "$o/ab.txt"
}
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-4}" ] && { [ "$r" = 1 ] || [ "$(el)" -lt "${RUN_S:-80}" ]; }; do
	for c in $cases; do
		n=${c%%:*} arms=$(echo "${c##*:}" | tr , ' ')
		[ $((r % 2)) = 0 ] && arms=$(echo "$arms" | tr ' ' '\n' | sort -r | tr '\n' ' ')
		for a in $arms; do
			if [ "$r" = 1 ]; then TO=25 bench "$n" "$a" "$r" --profile; else bench "$n" "$a" "$r"; fi
		done
	done
	echo "round $r done at $(el) s"
	r=$((r + 1))
done

# 3. the table
{
	echo "== correctness (y against main's, T = 4096, x uniform in [-1, 1])"
	cat "$o/same.txt"
	echo "== blocks (moert bench --graph, T = 4096, uniform, median us over the rounds; round 1 ran --profile)"
	python3 - "$o/ab.txt" <<'PY'
import sys, statistics, collections
v = collections.OrderedDict()
for l in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in l.split()[2:])
    v.setdefault(l.split()[1], collections.OrderedDict()).setdefault(f["arm"], []).append(f["us"])
for n, arms in v.items():
    med = {}
    for a, xs in arms.items():
        ys = [float(x) for x in xs if x not in ("FAILED", "WRONG", "SKIPPED")]
        med[a] = statistics.median(ys) if ys else None
    for a, xs in arms.items():
        m, b = med[a], med.get("main")
        rel = " (%.3fx main)" % (m / b) if m and b and a != "main" else ""
        print("%-9s %-5s %9s%s  rounds %s" % (n, a, "%.1f" % m if m else "-", rel, " ".join(xs)))
PY
	echo "== expert GEMM steps alone (moert bench --profile, us)"
	for f in "$o"/prof.*.txt; do
		[ -f "$f" ] || continue
		b=$(basename "$f" .txt)
		echo "$b $(awk '/^profile/ {on = 1; next} on && NF == 3 && $1 ~ /_k[3-6]$/ {printf "%s=%s ", $1, $2}' "$f" |
			sed 's/[a-z0-9_]*layer[0-9]*_//g')"
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "tiles done at $(el) s"

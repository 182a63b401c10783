#!/bin/sh
# fp8acc_ab.sh — the A/B of two accumulator sets in the FP8 x FP8 warp-specialised
# consumers (the default since session 35; --debug=f8-acc1 keeps one; issue 13) on the H200,
# in two steps:
#
#   sh bench/quant/fp8acc_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd) and DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                                  on the GPU, from the root of a checkout
#
# One bundle an arm and model: DeepSeek-V3's FP8 MoE layer 3 (models/deepseek-v3)
# and MiniMax-M2's FP8 MoE layer 0 (models/minimax-m2), the checkpoints'
# quantization_config, synthetic weights seed 1, sm_90a, --max-tokens=4096, --cubin:
#   main  MAIN_MOEC's default plan (k3 gate|up and k4 down: 64x256x128, two
#         consumer warpgroups of 64x128 side by side, whole k-tiles; since
#         session 35 two accumulator sets, as acc2 below)
#   acc1  MOEC --debug=f8-acc1: one set, each warpgroup's k-loop one serial
#         chain: wait full[k], k's wgmma group, wait_group 0, promote k (64
#         FFMA a thread), only then k + 1's group (session 34's main)
#   acc2  (session 35's run, when it was opt-in: MOEC --debug=f8-acc2 against a
#         MAIN_MOEC of one set; now MOEC's default) two accumulator sets a warpgroup: k + 1's group
#         issued into one before k's is waited for (wait_group 1) and promoted
#         from the other, so the promotion runs under the next k-tile's
#         wgmmas; runs of up to 8 k-tiles unrolled (k3: 56 k-tiles = 7 runs of
#         8 in a loop, k4: 16 = 2 of 8; MiniMax-M2: 24 = 3 of 8, 12 = 2 of 6),
#         one exposed promotion a run; k3, k4, the shared expert's down k6 and
#         the decode tiles (one consumer warpgroup: timed at T = 16 too); 0
#         spills (ptxas 13.0)
#   pph   session 34's prepared arm (DeepSeek-V3 only): --debug=f8-pingpong
#         with bench/quant/fp8_down_halves.tuning: k4 on ping-pong consumers,
#         each k-tile in two column halves (one promoted while the other's
#         group runs) so a warpgroup alone at the tensor cores keeps them
#         busy through its promotions
# On the GPU (about 100 s, every moert call under `timeout`):
# 1. correctness before timing: each arm's y against main's on the same input
#    (x uniform in [-1, 1], `moert run`): the same bits expected (the same
#    k32 steps and promotions in the same order); bits that differ are
#    reported DIFFERENT with rel_l2, and an arm past rel_l2 1e-3 is not timed;
# 2. round 1: `moert bench --graph --profile` (the layer, then each step
#    alone), then interleaved rounds of `moert bench --graph` (the arms' order
#    alternating) while time is left (none started past RUN_S, default 75 s);
# 3. a table last: per case and arm the layer's median over the rounds against
#    main, and the expert GEMM steps alone (round 1's profile).
# Writes $OUT/fp8acc/{same.txt,ab.txt,prof.*.txt,table.txt}.  On the CPU: CUBIN= at
# prepare keeps PTX in the bundles, which the stand-in driver (tests/gpu/fakecuda.c)
# loads: MOERT_LIBCUDA=build/tests/gpu/libfakecuda.so FAKECUDA_ANY=1 OUT=... sh DIR/run.sh
# runs the script's every step (its kernels compute nothing: every arm's y the same zeros).
set -u
bundles="ds.main ds.acc1 ds.pph mm.main mm.acc1"	# MODEL.ARM
cases=${CASES:-"ds4096:4096:main,acc1,pph ds256:256:main,acc1,pph mm4096:4096:main,acc1 ds16:16:main,acc1"}	# NAME:T:ARMS (NAME's first two letters: the model)
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	flags() {	# flags ARM: the arm's moec flags over main's plan
		case $1 in
		acc1) echo "--debug=f8-acc1" ;;
		pph) echo "--debug=f8-pingpong --tuning=$src/bench/quant/fp8_down_halves.tuning" ;;
		esac
	}
	for b in $bundles; do
		mo=${b%.*} a=${b#*.} m=$moec
		[ "$a" = main ] && m=$mmoec
		case $mo in
		ds) cfg=$src/models/deepseek-v3/config.json layer=3 ;;
		mm) cfg=$src/models/minimax-m2/config.json layer=0 ;;
		esac
		# shellcheck disable=SC2046
		"$m" compile "$cfg" --layer $layer --synthetic-weights=1 --arch=sm_90a \
			--max-tokens=4096 ${CUBIN---cubin} $(flags "$a") -v -o "$tmp/$b.moeb" >"$tmp/log" 2>&1 ||
			{ tail -5 "$tmp/log"; exit 1; }
		grep -E 'k[34] on sm_90a: tuning key .*t(65-256|1-1024|65-1024|1025-4096)' "$tmp/log" | sed "s/.*@/$b @/" >"$dir/$b.plan"
		"$moec" inspect "$tmp/$b.moeb" | grep -E '^  [a-z0-9_]+_k[346](_t[0-9]+_[0-9]+)? ' | sed "s/^/$b /" >>"$dir/$b.plan"
		if grep -E 'spills [1-9]' "$dir/$b.plan"; then
			echo "FAIL $b: a kernel spills"
			exit 1
		fi
		if [ "$a" != main ] && cmp -s "$tmp/$b.moeb" "$tmp/$mo.main.moeb"; then
			echo "FAIL $b is main's bundle byte for byte (the arm changes nothing)"
			exit 1
		fi
		xz -9 -c "$tmp/$b.moeb" >"$dir/$b.moeb.xz"
		echo "ok   $b ($(wc -c <"$tmp/$b.moeb") bytes, xz $(wc -c <"$dir/$b.moeb.xz"))"
	done
	"$moec" compile "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
		--max-tokens=4096 --cubin -o "$tmp/x.moeb" >/dev/null 2>&1 && cmp -s "$tmp/x.moeb" "$tmp/ds.main.moeb" &&
		echo "ok   MOEC without the flag: DeepSeek-V3's bundle is MAIN_MOEC's, byte for byte" ||
		echo "NOTE MOEC without the flag: DeepSeek-V3's bundle differs from MAIN_MOEC's"
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "fp8acc: expect about 100 s"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/fp8acc
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for b in $bundles; do xz -d -c "$here/$b.moeb.xz" >"$tmp/$b.moeb" || exit 1; done
cat "$here"/*.plan >"$o/plans.txt" 2>/dev/null
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout "${TO:-25}" "$tmp/moert" "$@"; }
echo "moert built at $(el) s"

# 1. correctness: y of each arm against main's, the same input, both T
: >"$o/same.txt"
: >"$tmp/bad"
for c in $cases; do
	n=${c%%:*} t=${c#*:} ca=${c##*:}
	t=${t%%:*}
	mo=$(echo "$n" | cut -c1-2)
	h=7168
	[ "$mo" = mm ] && h=3072
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, ($t, $h)).astype(np.float32))" ||
		exit 1
	for a in $(echo "$ca" | tr , ' '); do
		rm -rf "$tmp/o.$a"
		TO=40 M run "$tmp/$mo.$a.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >"$tmp/err" 2>&1 ||
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
if x.shape != y.shape:
    print("same %s %s vs main: shapes %s %s DIFFERENT" % (n, a, x.shape, y.shape)); sys.exit(1)
xf, yf = x.astype(np.float64), y.astype(np.float64)
same = x.dtype == y.dtype and x.tobytes() == y.tobytes()
rel = float(np.linalg.norm(xf - yf) / max(np.linalg.norm(xf), 1e-30))
nz = float((xf != 0).mean())
ok = np.isfinite(xf).all() and np.isfinite(yf).all() and nz > 0.5 and rel < 1e-3
print("same %s %s vs main: %s max_abs=%.3g rel_l2=%.3g nonzero=%.3f" % (n, a, "same bits" if same and ok else
      "DIFFERENT bits, within 1e-3" if ok else "DIFFERENT", np.abs(xf - yf).max(), rel, nz))
sys.exit(0 if ok else 1)
PY
	done
	echo "correct $n done at $(el) s"
done
cat "$o/same.txt"

# 2. round 1 with the steps alone, then rounds while time is left
bench() {	# bench CASE T ARM ROUND [flags]: one `moert bench --graph` line into ab.txt
	n=$1 t=$2 a=$3 r=$4
	shift 4
	if grep -qx "$n.$a" "$tmp/bad"; then us=WRONG; else
		M bench "$tmp/$(echo "$n" | cut -c1-2).$a.moeb" --tokens="$t" --graph --iters="${ITERS:-50}" --warmup=10 "$@" >"$tmp/b" 2>&1
		us=$(sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p' "$tmp/b")
		[ $# -gt 0 ] && cp "$tmp/b" "$o/prof.$a.$n.txt"
	fi
	echo "ab $n arm=$a round=$r us=${us:-FAILED}" | tee -a "$o/ab.txt"
}
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-6}" ] && { [ "$r" = 1 ] || [ "$(el)" -lt "${RUN_S:-75}" ]; }; do
	for c in $cases; do
		n=${c%%:*} t=${c#*:} order=$(echo "${c##*:}" | tr , ' ')
		t=${t%%:*}
		[ $((r % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | sed '/^$/d' | tac | tr '\n' ' ')
		for a in $order; do
			if [ "$r" = 1 ]; then TO=40 bench "$n" "$t" "$a" "$r" --profile; else bench "$n" "$t" "$a" "$r"; fi
		done
	done
	echo "round $r done at $(el) s"
	r=$((r + 1))
done

# 3. the table
{
	echo "== plans (the expert GEMMs' tuning keys and variants; k3, k4, k6 registers and spills)"
	cat "$o/plans.txt"
	echo "== correctness (y against main's, x uniform in [-1, 1])"
	cat "$o/same.txt"
	echo "== the FP8 layer (moert bench --graph, median us over the rounds; round 1 ran --profile)"
	python3 - "$o/ab.txt" <<'PY'
import sys, statistics, collections
v = collections.OrderedDict()
for l in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in l.split()[2:])
    v.setdefault(l.split()[1], collections.OrderedDict()).setdefault(f["arm"], []).append(f["us"])
for n, arms in v.items():
    med = {}
    for a, xs in arms.items():
        ys = [float(x) for x in xs if x not in ("FAILED", "WRONG")]
        med[a] = statistics.median(ys) if ys else None
    for a, xs in arms.items():
        m, b = med[a], med.get("main")
        rel = " (%.3fx main)" % (m / b) if m and b and a != "main" else ""
        print("%-7s %-5s %9s%s  rounds %s" % (n, a, "%.1f" % m if m else "-", rel, " ".join(xs)))
PY
	echo "== expert GEMM steps alone (moert bench --profile round 1, us; k3 gate|up, k4 down, k5/k6 the shared expert)"
	for f in "$o"/prof.*.txt; do
		[ -f "$f" ] || continue
		b=$(basename "$f" .txt)
		echo "$b $(awk '/^profile/ {on = 1; next} on && NF == 3 && $1 ~ /_k[3-6](_t[0-9]+_[0-9]+)?$/ {printf "%s=%s ", $1, $2}' "$f" |
			sed 's/[a-z0-9_]*layer[0-9]*_//g')"
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "fp8acc done at $(el) s"

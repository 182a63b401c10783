#!/bin/sh
# fp8dn_ab.sh — the A/B of DeepSeek-V3's FP8 down GEMM (k4) on 192- and 128-row
# tiles and on ping-pong consumers at prefill on the H200 (issue 13, session 34), in two steps:
#
#   sh bench/quant/fp8dn_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd) and DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                                 on the GPU, from the root of a checkout
#
# One bundle an arm: DeepSeek-V3's FP8 MoE layer 3 (models/deepseek-v3, the
# checkpoint's quantization_config, synthetic weights seed 1, sm_90a,
# --max-tokens=4096, --cubin), timed at T = 4096 and T = 256:
#   main  MAIN_MOEC's default plan (k4 at T = 1025..4096: 64x256x128, two
#         consumer warpgroups side by side, persistent over 132 CTAs)
#   d192  bench/quant/fp8_down192.tuning: k4 at T = 1025..4096 on 192x128x128
#         tiles, three consumer warpgroups stacked over the rows (each 64x128,
#         the same k-tile wgmma group and promotion as main's), 5 stages,
#         persistent over 132 CTAs (stacked_persistent): an expert's ~128 +- 11
#         rows in one row tile, so B's 7168 x 2048 e4m3 of an expert stream
#         once where 64-row tiles stream them 2-3 times (3.8 GB of B from L2
#         into shared memory a k4 instead of ~9.4; 192 rows computed for ~128).  T = 256
#         takes the t65-256 bucket, main's kernel: timed at T = 4096 only.
#   d128  bench/quant/fp8_down128.tuning: k4 at T = 1025..4096 on 128x128x128
#         tiles, two consumer warpgroups stacked (64x128 each), 5 stages,
#         persistent over 132 CTAs (f8_persistent): B streamed ~1.5 times, 32 KB
#         a k-tile for 128x128 MACs (d192 40 KB for 192x128, main 40 KB for
#         64x256); T = 4096 only (at 256 it is main's kernel too).
#   pp    --debug=f8-pingpong: k4 at T = 65..4096 on ping-pong consumers, the
#         64x256 tile's two warpgroups each on whole 64x128 tiles of their
#         own, taking turns at the tensor cores (the hand-over once its last
#         k-tile's wgmmas are issued), so one's last promotion and epilogue (x
#         routing weight, f32 rows scattered) run under the other's wgmmas;
#         persistent over 132 CTAs; A read twice as often, B as often.
#   pph   pp with the halves (bench/quant/fp8_down_halves.tuning: no .fw, each
#         k-tile in two column groups, one promoted while the other runs), so
#         a warpgroup holding the tensor cores alone keeps them busy through
#         its promotions (added after session 34's batch, which measured the
#         other arms; not yet on the GPU)
# On the GPU (about 100 s, every moert call under `timeout`):
# 1. correctness before timing: each arm's y against main's on the same input
#    (x uniform in [-1, 1], T = 4096 and 256, `moert run`): the same bits
#    expected (each output the same k32 steps and promotions in the same
#    order); bits that differ are reported DIFFERENT with rel_l2, and an arm
#    past rel_l2 1e-3 (a wrong tile is O(1)) is not timed;
# 2. round 1: `moert bench --graph --profile` (the layer, then each step
#    alone), then interleaved rounds of `moert bench --graph` (the arms' order
#    alternating) while time is left (none started past RUN_S, default 80 s);
# 3. a table last: per T and arm the layer's median over the rounds against
#    main, and k3 / k4 alone (k3 is the same kernel in every arm).
# Writes $OUT/fp8dn/{same.txt,ab.txt,prof.*.txt,table.txt}.
set -u
arms="main d192 d128 pp pph"
cases="ds4096:4096:main,d192,d128,pp,pph ds256:256:main,pp,pph"	# NAME:T:ARMS
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	flags() {	# flags ARM: the arm's moec flags over main's plan
		case $1 in
		d192) echo "--tuning=$src/bench/quant/fp8_down192.tuning" ;;
		d128) echo "--tuning=$src/bench/quant/fp8_down128.tuning" ;;
		pp) echo "--debug=f8-pingpong" ;;
		pph) echo "--debug=f8-pingpong --tuning=$src/bench/quant/fp8_down_halves.tuning" ;;
		esac
	}
	for a in $arms; do
		m=$moec
		[ "$a" = main ] && m=$mmoec
		# shellcheck disable=SC2046
		"$m" compile "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
			--max-tokens=4096 --cubin $(flags "$a") -v -o "$tmp/$a.moeb" >"$tmp/log" 2>&1 ||
			{ tail -5 "$tmp/log"; exit 1; }
		grep -E 'k4 on sm_90a: tuning key .*t(65-256|1025-4096)' "$tmp/log" | sed 's/.*@/@/' >"$dir/$a.plan"
		"$moec" inspect "$tmp/$a.moeb" | grep -E '^  launch deepseek_v3_layer3_k4(_t65_1024)? ' >>"$dir/$a.plan"
		if [ "$a" != main ] && cmp -s "$tmp/$a.moeb" "$tmp/main.moeb"; then
			echo "FAIL $a is main's bundle byte for byte (the arm changes nothing)"
			exit 1
		fi
		xz -9 -c "$tmp/$a.moeb" >"$dir/$a.moeb.xz"
		echo "ok   $a ($(wc -c <"$tmp/$a.moeb") bytes, xz $(wc -c <"$dir/$a.moeb.xz"))"
	done
	"$moec" compile "$src/models/deepseek-v3/config.json" --layer 3 --synthetic-weights=1 --arch=sm_90a \
		--max-tokens=4096 --cubin -o "$tmp/x.moeb" >/dev/null 2>&1 && cmp -s "$tmp/x.moeb" "$tmp/main.moeb" &&
		echo "ok   MOEC without the table: the bundle is MAIN_MOEC's, byte for byte" ||
		echo "NOTE MOEC without the table: the bundle differs from MAIN_MOEC's"
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "fp8dn: expect about 100 s"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/fp8dn
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for a in $arms; do xz -d -c "$here/$a.moeb.xz" >"$tmp/$a.moeb" || exit 1; done
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
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, ($t, 7168)).astype(np.float32))" ||
		exit 1
	for a in $(echo "$ca" | tr , ' '); do
		rm -rf "$tmp/o.$a"
		TO=40 M run "$tmp/$a.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >"$tmp/err" 2>&1 ||
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
		M bench "$tmp/$a.moeb" --tokens="$t" --graph --iters="${ITERS:-50}" --warmup=10 "$@" >"$tmp/b" 2>&1
		us=$(sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p' "$tmp/b")
		[ $# -gt 0 ] && cp "$tmp/b" "$o/prof.$a.$n.txt"
	fi
	echo "ab $n arm=$a round=$r us=${us:-FAILED}" | tee -a "$o/ab.txt"
}
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-6}" ] && { [ "$r" = 1 ] || [ "$(el)" -lt "${RUN_S:-80}" ]; }; do
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
	echo "== plans (k4 at T = 65..256 and 1025..4096, its launches)"
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
	echo "== expert GEMM steps alone (moert bench --profile, us; k3 gate|up, k4 down)"
	for f in "$o"/prof.*.txt; do
		[ -f "$f" ] || continue
		b=$(basename "$f" .txt)
		echo "$b $(awk '/^profile/ {on = 1; next} on && NF == 3 && $1 ~ /_k[3-6](_t[0-9]+_[0-9]+)?$/ {printf "%s=%s ", $1, $2}' "$f" |
			sed 's/[a-z0-9_]*layer[0-9]*_//g')"
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "fp8dn done at $(el) s"

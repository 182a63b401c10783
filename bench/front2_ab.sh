#!/bin/sh
# front2_ab.sh — the A/B of the decode fronts with --debug=front2 on the H200
# (issue 12, session 35), in two steps:
#
#   sh bench/front2_ab.sh prepare MOEC MAIN_MOEC DIR   here: bundles (xz'd) and DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                            on the GPU, from the root of a checkout
#
# (CUBIN= prepare: PTX bundles, for a dry run on tests/gpu's fake driver:
# MOERT_LIBCUDA=build/tests/gpu/libfakecuda.so FAKECUDA_ANY=1.)
#
# The decode bench bundles (bench/make_bench.sh's lines: synthetic weights,
# sm_90a, --cubin): Mixtral-8x7B T = 16, Qwen3-30B-A3B T = 16 and T = 1,
# DeepSeek-V3 (bf16) T = 16, gpt-oss-20b (bf16) T = 16.  Arms:
#   main  MAIN_MOEC's default plan
#   pair  MAIN_MOEC --debug=front-pair,vec-ahead (session 32's pair arm: two
#         tokens a warp, sums by shuffles, W ahead; the butterfly top-k, the
#         slot sort and the acq_rel hand-over at every T)
#   f2    MOEC --debug=front2: pair's front and the whole rows of a warp's
#         tokens (up to 16 groups of 8 a lane) loaded before they are used
#         where a CTA has one expert (Mixtral's 4096 and gpt-oss's 2880 a
#         token, Qwen3's two 2048): x in one round trip, W and gamma (ahead)
#         in another, instead of two each
#   fp    (DeepSeek-V3 only) MAIN_MOEC --debug=front-pair: pair without
#         vec-ahead's last CTA (session 32: DeepSeek-V3's block 1.005x slower
#         with vec-ahead, its front alone faster; which part costs?)
#   f2da  (Mixtral only) MOEC --debug=front2,down-ahead: f2, the down's B
#         ahead (down-ahead alone, session 32: Mixtral 0.997x, not timed
#         again here), and the gate|up's too (program.c gate_up_ahead:
#         every expert touched at max_tokens, so its CTAs, waiting for the
#         front, send their runs' first 6 k-tiles toward L2 meanwhile)
# An arm whose bundle is another arm's byte for byte is dropped for that case
# (DeepSeek-V3 has no whole rows: pair is f2 there; Qwen3 T = 1's
# front is the split one: f2 and pair are main there), and a case left with
# main alone is not run (arms.txt says so).
# On the GPU (about 100 s, every moert call under `timeout`):
# 1. correctness before timing: each arm's y against main's on the same input
#    (x uniform in [-1, 1], `moert run`): the same bits expected (every
#    logit the same sums in the same order; the routing and the GEMMs the
#    same); an arm that differs is reported and not timed;
# 2. round 1: `moert bench --graph --profile` (the block, then each step
#    alone) with the routing dumped (moe.ids, moe.offs, moe.rows,
#    router_logits: the same bytes as main's expected), then interleaved
#    rounds of `moert bench --graph` (the arms' order alternating) while time
#    is left (none started past RUN_S, default 65 s; no call past HARD_S, 95 s);
# 3. ncu of main's and f2's Mixtral front (SpeedOfLight, WarpStateStats),
#    when less than 80 s have passed;
# 4. a table last: per case and arm the block's median over the rounds
#    against main, and the front alone (round 1's --profile).
# Writes $OUT/front2/{same.txt,dump.txt,ab.txt,prof.*.txt,ncu.*.txt,table.txt}.
set -u
cases="mixtral_T16:16:4096 qwen3_T16:16:2048 qwen3_T1:1:2048 deepseek_T16:16:7168 gptoss_T16:16:2880"	# NAME:T:H
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	only='^(mixtral_T16|qwen3_T16|qwen3_T1|deepseek_T16|gptoss_T16)$'
	ONLY=$only MOEC_FLAGS="${CUBIN---cubin}" sh "$src/bench/make_bench.sh" "$mmoec" "$tmp/main" >/dev/null || exit 1
	ONLY=$only MOEC_FLAGS="${CUBIN---cubin} --debug=front-pair,vec-ahead" sh "$src/bench/make_bench.sh" "$mmoec" \
		"$tmp/pair" >/dev/null || exit 1
	ONLY=$only MOEC_FLAGS="${CUBIN---cubin} --debug=front2" sh "$src/bench/make_bench.sh" "$moec" "$tmp/f2" >/dev/null ||
		exit 1
	ONLY=$only MOEC_FLAGS="${CUBIN---cubin}" sh "$src/bench/make_bench.sh" "$moec" "$tmp/plain" >/dev/null || exit 1
	ONLY='^deepseek_T16$' MOEC_FLAGS="${CUBIN---cubin} --debug=front-pair" sh "$src/bench/make_bench.sh" "$mmoec" \
		"$tmp/fp" >/dev/null || exit 1
	ONLY='^mixtral_T16$' MOEC_FLAGS="${CUBIN---cubin} --debug=front2,down-ahead" sh "$src/bench/make_bench.sh" \
		"$moec" "$tmp/f2da" >/dev/null || exit 1
	: >"$dir/arms.txt"
	for c in $cases; do
		n=${c%%:*}
		cmp -s "$tmp/plain/$n.moeb" "$tmp/main/$n.moeb" ||
			{ echo "FAIL $n: MOEC without the flag is not MAIN_MOEC's bundle"; exit 1; }
		arms=main
		for a in f2 pair fp f2da; do
			[ -f "$tmp/$a/$n.moeb" ] || continue
			dup=""
			for b in $arms; do cmp -s "$tmp/$a/$n.moeb" "$tmp/$b/$n.moeb" && dup=$b; done
			if [ -n "$dup" ]; then
				echo "note $n: $a is $dup's bundle byte for byte (dropped)"
				echo "# $n: $a is $dup's bundle byte for byte" >>"$dir/arms.txt"
				continue
			fi
			arms="$arms $a"
		done
		echo "$n $arms" >>"$dir/arms.txt"
		for a in $arms; do
			xz -9 -c "$tmp/$a/$n.moeb" >"$dir/$a.$n.moeb.xz"
			"$moec" inspect "$tmp/$a/$n.moeb" | grep -E '_front ' | sed "s/^/$a $n: /" >>"$dir/fronts.txt"
		done
		echo "ok   $n: $arms"
	done
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "front2: expect about 100 s"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/front2
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
arms_of() { awk -v n="$1" '$1 == n {$1 = ""; print}' "$here/arms.txt"; }
ran=""	# the cases with an arm besides main
for c in $cases; do [ "$(arms_of "${c%%:*}" | wc -w)" -gt 1 ] && ran="$ran $c"; done
cases=$ran
for c in $cases; do
	n=${c%%:*}
	for a in $(arms_of "$n"); do xz -d -c "$here/$a.$n.moeb.xz" >"$tmp/$a.$n.moeb" || exit 1; done
done
cp "$here/arms.txt" "$here/fronts.txt" "$o/" 2>/dev/null
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout "${TO:-25}" "$tmp/moert" "$@"; }
echo "moert built at $(el) s"

# 1. correctness: y of each arm against main's, the same input
: >"$o/same.txt"
: >"$tmp/bad"
for c in $cases; do
	n=${c%%:*} t=${c#*:} h=${c##*:}
	t=${t%%:*}
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, ($t, $h)).astype(np.float32))" ||
		exit 1
	for a in $(arms_of "$n"); do
		rm -rf "$tmp/o.$a"
		TO=40 M run "$tmp/$a.$n.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >"$tmp/err" 2>&1 ||
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
ok = same and np.isfinite(xf).all() and nz > 0.5
print("same %s %s vs main: %s max_abs=%.3g rel_l2=%.3g nonzero=%.3f" % (n, a, "same bits" if ok else
      "DIFFERENT", np.abs(xf - yf).max(), rel, nz))
sys.exit(0 if ok else 1)
PY
	done
	echo "correct $n done at $(el) s"
done
cat "$o/same.txt"

# 2. round 1 with the routing dumped and the steps alone, then rounds while time is left
bench() {	# bench CASE T ARM ROUND [flags]: one `moert bench --graph` line into ab.txt
	n=$1 t=$2 a=$3 r=$4
	shift 4
	if grep -qx "$n.$a" "$tmp/bad"; then us=WRONG
	elif [ "$(el)" -ge "${HARD_S:-95}" ]; then us=SKIPPED	# no call past HARD_S
	else
		M bench "$tmp/$a.$n.moeb" --tokens="$t" --graph --iters="${ITERS:-50}" --warmup=10 "$@" >"$tmp/b" 2>&1
		us=$(sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p' "$tmp/b" | head -1)
		[ $# -gt 0 ] && cp "$tmp/b" "$o/prof.$a.$n.txt"
	fi
	echo "ab $n arm=$a round=$r us=${us:-FAILED}" | tee -a "$o/ab.txt"
}
: >"$o/ab.txt"
: >"$o/dump.txt"
r=1
while [ "$r" -le "${ROUNDS:-8}" ] && { [ "$r" = 1 ] || [ "$(el)" -lt "${RUN_S:-65}" ]; }; do
	for c in $cases; do
		n=${c%%:*} t=${c#*:}
		t=${t%%:*}
		order=$(arms_of "$n")
		[ $((r % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | sed '/^$/d' | tac | tr '\n' ' ')
		for a in $order; do
			if [ "$r" = 1 ]; then
				TO=40 bench "$n" "$t" "$a" "$r" --profile --dump=moe.ids="$tmp/d.$a.ids" \
					--dump=moe.offs="$tmp/d.$a.offs" --dump=moe.rows="$tmp/d.$a.rows" \
					--dump=router_logits="$tmp/d.$a.logits"
			else
				bench "$n" "$t" "$a" "$r"
			fi
		done
		if [ "$r" = 1 ]; then	# the routing against main's, byte for byte
			for a in $order; do
				[ "$a" = main ] && continue
				line="dump $n $a vs main:"
				for buf in ids offs rows logits; do
					if [ ! -s "$tmp/d.main.$buf" ] || [ ! -s "$tmp/d.$a.$buf" ]; then
						line="$line $buf=MISSING"
					elif cmp -s "$tmp/d.main.$buf" "$tmp/d.$a.$buf"; then
						line="$line $buf=same"
					else
						line="$line $buf=DIFFERENT($(cmp -l "$tmp/d.main.$buf" "$tmp/d.$a.$buf" | wc -l)B)"
					fi
				done
				echo "$line" | tee -a "$o/dump.txt"
			done
			rm -f "$tmp"/d.*
		fi
	done
	echo "round $r done at $(el) s"
	r=$((r + 1))
done

# 3. ncu of Mixtral's front, main and f2, if time is left
if [ "$(el)" -lt "${NCU_S:-80}" ] && command -v ncu >/dev/null 2>&1; then
	for a in main f2; do
		timeout 15 ncu --clock-control none -k regex:front -c 1 --section SpeedOfLight \
			--section WarpStateStats "$tmp/moert" bench "$tmp/$a.mixtral_T16.moeb" --tokens=16 --iters=1 \
			--warmup=0 >"$o/ncu.$a.mixtral_T16.txt" 2>&1 || echo "ncu $a: rc=$? (see ncu.$a.mixtral_T16.txt)"
		echo "ncu $a done at $(el) s"
	done
fi

# 4. the table
{
	echo "== fronts (arm case: kernel, registers)"
	cat "$o/fronts.txt" 2>/dev/null
	echo "== correctness (y against main's, x uniform in [-1, 1]; routing dumps of round 1)"
	cat "$o/same.txt" "$o/dump.txt"
	echo "== the block (moert bench --graph, median us over the rounds; round 1 ran --profile), front alone (us)"
	python3 - "$o/ab.txt" "$o" <<'PY'
import sys, os, statistics, collections
v = collections.OrderedDict()
for l in open(sys.argv[1]):
    f = dict(w.split("=", 1) for w in l.split()[2:])
    v.setdefault(l.split()[1], collections.OrderedDict()).setdefault(f["arm"], []).append(f["us"])
def front(a, n):
    p = os.path.join(sys.argv[2], "prof.%s.%s.txt" % (a, n))
    try:
        on = False
        for l in open(p):
            if l.startswith("profile"):
                on = True; continue
            w = l.split()
            if on and len(w) == 3 and w[0].endswith("_front"):
                return w[1]
    except OSError:
        pass
    return "-"
for n, arms in v.items():
    med = {}
    for a, xs in arms.items():
        ys = [float(x) for x in xs if x not in ("FAILED", "WRONG", "SKIPPED")]
        med[a] = statistics.median(ys) if ys else None
    for a, xs in arms.items():
        m, b = med[a], med.get("main")
        rel = " (%.3fx main)" % (m / b) if m and b and a != "main" else ""
        print("%-13s %-5s %9s%-15s front %6s  rounds %s" % (n, a, "%.1f" % m if m else "-", rel, front(a, n),
                                                           " ".join(xs)))
PY
	for a in main f2; do
		f=$o/ncu.$a.mixtral_T16.txt
		[ -f "$f" ] || continue
		echo "== ncu $a mixtral_T16 front"
		grep -E 'Duration|Elapsed Cycles|SM Active|Memory Throughput|DRAM Throughput|Compute \(SM\)|Warp Cycles Per Issued|Avg. Active Threads' "$f" | head -12
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "front2 done at $(el) s"

#!/bin/sh
# tma_gather_ab.sh — the A/B of gathered A rows by one-row TMA boxes
# (--debug=tma-gather, issue 12, session 35) on the H200, in two steps:
#
#   [TG=0] sh bench/tma_gather_ab.sh prepare MOEC MAIN_MOEC DIR [PC_MOEC]   here: bundles (xz'd), DIR/run.sh
#   OUT=<dir> sh DIR/run.sh                                          on the GPU, from the root of a checkout
#
# Arms (sm_90a, --max-tokens=4096, --cubin; full-size MoE layers with synthetic weights, bf16):
#   main  MAIN_MOEC, its default plan: at T = 4096 the gate|up (k3) is the
#         warp-specialised GEMM in clusters sharing B, A's gathered rows by the
#         producer warpgroup's cp.async (docs/codegen.md, "Gathered A rows")
#   tg    MOEC --debug=tma-gather: the same kernel, A's rows by one-row TMA boxes
#         from one producer warp, no cp.async, no proxy fence (TG=0 at prepare: not
#         built; session 35 measured it 3-6x slower, TMA-issue bound)
#   pc    (with PC_MOEC: a MOEC built with PERM_COPY_DEFAULT 1 in passes/fuse_gemm.c)
#         the permuted copy: x's rows copied in expert order by a body kernel of
#         their own (a thread an element), then k3 with A by TMA as the down's
# Cases: Mixtral-8x7B, Qwen3-30B-A3B, DeepSeek-V3 layer 3 (bf16) at T = 4096;
# gpt-oss-20b (bf16) if time is left.
# On the GPU (about 100 s, every moert call under `timeout`):
# 1. correctness before timing, per case, every arm and main on the same seeded
#    inputs: k3's output (arena buffer moe.act, `moert bench --dump`) and
#    Mixtral's y (`moert run`, x uniform in [-1, 1]) must be main's bits (same
#    math, same order); an arm that differs is not timed on that case;
# 2. interleaved rounds (ROUNDS, default 3; none started past 65 s) of
#    `moert bench --graph` (30 iters), the arms' order rotating, medians;
# 3. k3 alone: one `moert bench --graph --profile` per arm and case (k3's step
#    time, the steps' sum; every step of each arm, pc's copy among them);
# a short table last.  Writes $OUT/tg/{same.txt,ab.txt,prof.txt,table.txt}.
set -u
CASES="mixtral qwen3 deepseek gptoss"
if [ "${1:-}" = prepare ]; then
	moec=$2 mmoec=$3 dir=$4 pcmoec=${5:-}
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	for m in deepseek-v3 gpt-oss-20b; do	# the bf16 blocks of the quantised checkpoints (make_bench.sh's)
		mkdir -p "$tmp/$m"
		python3 "$src/bench/bf16_config.py" "$src/models/$m/config.json" "$tmp/$m/config.json" || exit 1
	done
	model() {	# model CASE: its config and layer
		case $1 in
		mixtral) echo "$src/models/mixtral-8x7b/config.json 0" ;;
		qwen3) echo "$src/models/qwen3-30b-a3b/config.json 0" ;;
		deepseek) echo "$tmp/deepseek-v3/config.json 3" ;;
		gptoss) echo "$tmp/gpt-oss-20b/config.json 0" ;;
		esac
	}
	one() {	# one FILE MOEC CASE DEBUG: DIR/FILE.xz
		f=$1 m=$2 c=$3 dbg=$4
		# shellcheck disable=SC2046
		set -- $(model "$c")
		"$m" compile "$1" --layer "$2" --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 --cubin \
			--debug="$dbg" -o "$tmp/$f" >"$tmp/$f.log" 2>&1 || { tail -5 "$tmp/$f.log"; exit 1; }
		xz -9 -c "$tmp/$f" >"$dir/$f.xz"
		echo "ok   $f ($(wc -c <"$tmp/$f") bytes, xz $(wc -c <"$dir/$f.xz"))"
	}
	: >"$dir/k3.txt"
	for c in $CASES; do
		one "main.$c.moeb" "$mmoec" "$c" manifest || exit 1
		[ "${TG:-1}" = 0 ] || one "tg.$c.moeb" "$moec" "$c" manifest,tma-gather || exit 1
		if [ -n "$pcmoec" ]; then
			one "pc.$c.moeb" "$pcmoec" "$c" manifest || exit 1
			grep -q "^kernel [a-z0-9_]*_k3 .*params=[a-z,]*,tmap,tmap,i32 .*cluster=2" "$tmp/pc.$c.moeb.log" ||
				{ echo "FAIL $c: pc's k3 is not the WS GEMM with A by TMA"; exit 1; }
		fi
		# the T = 4096 gate|up: main's by cp.async (B's map alone), tg's with A's one-row map first
		k3=$(sed -n 's/^launch \([a-z0-9_]*_k3\) .*tokens=[0-9]*\.\.4096.*/\1/p' "$tmp/main.$c.moeb.log")
		[ -n "$k3" ] || { echo "FAIL $c: no T = 4096 gate|up launch in main's manifest"; exit 1; }
		grep -q "^kernel $k3 .*params=[a-z,]*ptr,tmap,i32 .*cluster=2" "$tmp/main.$c.moeb.log" ||
			{ echo "FAIL $c: main's $k3 is not the cp.async WS kernel in clusters"; exit 1; }
		if [ "${TG:-1}" != 0 ]; then
			grep -q "^kernel $k3 .*params=[a-z,]*ptr,tmap,tmap,i32 .*cluster=2" "$tmp/tg.$c.moeb.log" ||
				{ echo "FAIL $c: tg's $k3 has no A map"; exit 1; }
			grep -q "^tensormap .* box=[0-9]*,1 swizzle=128" "$tmp/tg.$c.moeb.log" ||
				{ echo "FAIL $c: tg has no one-row map"; exit 1; }
		fi
		echo "$c $k3" >>"$dir/k3.txt"
	done
	# without the flag this tree's bundle is main's (the default is unchanged)
	# shellcheck disable=SC2046
	set -- $(model mixtral)
	"$moec" compile "$1" --layer "$2" --synthetic-weights=1 --arch=sm_90a --max-tokens=4096 --cubin -o "$tmp/x.moeb" \
		>/dev/null 2>&1 && xz -d -c "$dir/main.mixtral.moeb.xz" | cmp -s - "$tmp/x.moeb" &&
		echo "ok   MOEC without the flag: Mixtral's bundle is MAIN_MOEC's, byte for byte" ||
		echo "NOTE MOEC without the flag: Mixtral's bundle differs from MAIN_MOEC's"
	cp "$0" "$dir/run.sh"
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

echo "tg: expect about 100 s"
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/tg
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$here"/*.moeb.xz; do xz -d -c "$f" >"$tmp/$(basename "$f" .xz)" || exit 1; done
ARMS=
for a in tg pc; do [ -f "$tmp/$a.mixtral.moeb" ] && ARMS="$ARMS $a"; done
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout "${TO:-25}" "$tmp/moert" "$@"; }
echo "moert built at $(el) s; arms main $ARMS"
H() { case $1 in mixtral) echo 4096 ;; qwen3) echo 2048 ;; deepseek) echo 7168 ;; gptoss) echo 2880 ;; esac; }

# 1. correctness: k3's output (Mixtral: and y), each arm against main, the same bits
: >"$o/same.txt"
: >"$tmp/timed"
for c in $CASES; do
	if [ "$c" = gptoss ] && [ "$(el)" -gt 30 ]; then echo "same $c: skipped (time)" >>"$o/same.txt"; continue; fi
	[ "$c" = mixtral ] && { python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, (4096, $(H "$c"))).astype(np.float32))" || exit 1; }
	for a in main $ARMS; do
		rm -rf "$tmp/y.$a" "$tmp/act.$a"
		M bench "$tmp/$a.$c.moeb" --tokens=4096 --iters=1 --warmup=0 --dump=moe.act="$tmp/act.$a" \
			>"$tmp/b.$a" 2>&1 || echo "same $c $a: bench --dump FAILED: $(tail -c 300 "$tmp/b.$a")" >>"$o/same.txt"
		# the layer's y too, once
		[ "$c" = mixtral ] && { M run "$tmp/$a.$c.moeb" --input=x="$tmp/x.npy" -o "$tmp/y.$a" >/dev/null 2>"$tmp/e.$a" ||
			echo "same $c $a: run FAILED: $(tail -c 300 "$tmp/e.$a")" >>"$o/same.txt"; }
	done
	for a in $ARMS; do
		python3 - "$tmp" "$c" "$a" >>"$o/same.txt" <<'PY' && echo "$c $a" >>"$tmp/timed"
import glob, os, sys
import numpy as np
t, c, arm = sys.argv[1], sys.argv[2], sys.argv[3]
good = True
try:
    a, b = open(t + "/act.main", "rb").read(), open(t + "/act." + arm, "rb").read()
    same = a == b and len(a) > 0
    nz = np.frombuffer(a, np.uint16).astype(bool).mean() if len(a) else 0
    print("same %s %s k3 (moe.act, %d bytes, %.2f nonzero): %s" % (c, arm, len(a), nz,
          "SAME BITS" if same else "DIFFERENT"))
    good &= same and nz > 0.3
    ys = sorted(os.path.basename(p) for p in glob.glob(t + "/y.main/*.npy"))
    if c == "mixtral" and not ys:
        print("same %s: no y from main" % c); good = False
    for y in ys:
        p, q = np.load(t + "/y.main/" + y), np.load(t + "/y." + arm + "/" + y)
        same = p.shape == q.shape and p.tobytes() == q.tobytes()
        d = np.abs(p.astype(np.float64) - q.astype(np.float64)) if p.shape == q.shape else np.array([np.inf])
        print("same %s %s %s %s: %s max_abs=%.3g finite=%s" % (c, arm, y, p.shape, "SAME BITS" if same else "DIFFERENT",
              d.max(), bool(np.isfinite(q).all())))
        good &= same
except Exception as e:
    print("same %s %s: %s FAILED" % (c, arm, e)); good = False
sys.exit(0 if good else 1)
PY
	done
	echo "same $c: at $(el) s" >>"$o/same.txt"
done
cat "$o/same.txt"
echo "correctness done at $(el) s; timed: $(tr '\n' ',' <"$tmp/timed")"
[ -s "$tmp/timed" ] || { echo "tg: no arm the same bits: not timed"; exit 1; }
arms_of() { sed -n "s/^$1 //p" "$tmp/timed" | tr '\n' ' '; }
cases=$(cut -d' ' -f1 "$tmp/timed" | uniq)

# 2. interleaved rounds of the layer, the arms' order rotating
: >"$o/ab.txt"
r=1
while [ "$r" -le "${ROUNDS:-3}" ] && [ "$(el)" -lt 65 ]; do
	for c in $cases; do
		# shellcheck disable=SC2046
		set -- main $(arms_of "$c")
		i=1
		while [ $i -lt $(( (r - 1) % $# + 1 )) ]; do a=$1; shift; set -- "$@" "$a"; i=$((i + 1)); done
		line="ab $c T=4096 round=$r"
		for a in "$@"; do
			us=$(M bench "$tmp/$a.$c.moeb" --tokens=4096 --graph --iters=30 --warmup=5 2>&1 |
				sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
			line="$line $a=${us:-FAILED}"
		done
		echo "$line" | tee -a "$o/ab.txt"
	done
	r=$((r + 1))
done
echo "rounds done at $(el) s"

# 3. k3 alone and the steps' sum (--profile: each step timed alone); pc's steps main has not
: >"$o/prof.txt"
for c in $cases; do
	[ "$(el)" -lt 88 ] || { echo "prof $c: skipped (time)" >>"$o/prof.txt"; continue; }
	k3=$(sed -n "s/^$c //p" "$here/k3.txt")
	line="prof $c $k3"
	for a in main $(arms_of "$c"); do
		M bench "$tmp/$a.$c.moeb" --tokens=4096 --graph --iters=20 --warmup=3 --profile >"$tmp/p.$a" 2>&1
		cp "$tmp/p.$a" "$o/profile.$c.$a.txt"
		us=$(awk -v k="$k3" '/^profile/ {on = 1; next} on && $1 == k {print $2; exit}' "$tmp/p.$a")
		sum=$(awk '/^profile/ {on = 1; next} on && $1 == "sum" {print $2; exit}' "$tmp/p.$a")
		line="$line $a=${us:-FAILED}/${sum:-FAILED}"
	done
	echo "$line" | tee -a "$o/prof.txt"
	for a in main $(arms_of "$c"); do	# every step (pc: the copy k7/k8 are new, names shift)
		awk -v h="prof $c $a steps" '/^profile/ {on = 1; next} on && NF == 3 && $1 != "sum" {sub(/^.*_k/, "k", $1); h = h " " $1 "=" $2}
			END {print h}' "$tmp/p.$a" | tee -a "$o/prof.txt"
	done
done
echo "profiles done at $(el) s"

{
	echo "== correctness (each arm against main, the same inputs)"; cat "$o/same.txt"
	echo "== k3 alone / the steps' sum (moert bench --graph --profile, us)"; cat "$o/prof.txt"
	echo "== the layer, interleaved rounds (moert bench --graph, 30 iters, median us; x main < 1: faster)"
	python3 - "$o/ab.txt" <<'PY'
import statistics, sys
v = {}
for l in open(sys.argv[1]):
    f = l.split()
    for kv in f[4:]:
        k, x = kv.split("=")
        if x != "FAILED":
            v.setdefault(f[1], {}).setdefault(k, []).append(float(x))
for c, arms in v.items():
    m = {k: statistics.median(xs) for k, xs in arms.items()}
    base = m.get("main")
    line = "%-9s main %8.1f" % (c, base if base else float("nan"))
    for k in sorted(m):
        if k != "main":
            line += "  %s %8.1f (x main %.3f)" % (k, m[k], m[k] / base if base else float("nan"))
    print(line + "  rounds " + " ".join("%s %s" % (k, arms[k]) for k in sorted(arms)))
PY
} >"$o/table.txt"
cat "$o/table.txt"
echo "tg done at $(el) s"

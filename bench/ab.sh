#!/bin/sh
# ab.sh — an A/B of compile arms on the GPU, from a spec file, in two steps:
#
#   sh bench/ab.sh prepare SPEC MOEC MAIN_MOEC DIR   here: bundles (xz'd), DIR/run.sh, DIR/spec
#   OUT=<dir> sh DIR/run.sh                          on the GPU, from the root of a checkout
#
# The spec (bench/ab/*.ab), a line each, `#` comments:
#   bundle NAME MAXT MODEL [ARGS...]   a compile line: MODEL is a path from the
#                                      checkout's root (@bf16:M: models/M's config
#                                      without its quantization_config), ARGS
#                                      moec's (--layer, --synthetic-weights=1, ...)
#   arm ARM [FLAGS...]                 MOEC's flags over main's plan (`main` is
#                                      MAIN_MOEC with no flags)
#   case NAME BUNDLE T H ARMS [SKEW]   time BUNDLE's arms (main,a,b) at T tokens,
#                                      x of H columns; SKEW for moert bench --skew
#   bound REL                          rel_l2 an arm may differ from main by
#                                      (default 0: the same bits)
#   steps REGEX                        the steps listed alone in the table
#                                      (default _k[3-6]: the expert GEMMs)
#   name NAME                          the output folder $OUT/NAME (default ab)
#   dump BUF [BUF...]                  arena buffers (moe.ids, router_logits, ...)
#                                      dumped by round 1's calls and compared
#                                      with main's byte for byte (dump.txt)
# prepare: every bundle's arms compiled (--arch=sm_90a --cubin -v); an arm whose
# bundle is main's byte for byte is an error (it tests nothing), so is a kernel
# that spills registers where main's do not (ptxas, `moec inspect`), and MOEC with
# no flags must give main's bundle (else a NOTE: the tree changed a default).
# On the GPU, every moert call under `timeout`:
# 1. correctness before timing: each arm's y against main's on the same x
#    (uniform in [-1, 1], seed 7, `moert run`); an arm past the bound (or, at
#    bound 0, with other bits) is reported DIFFERENT and not timed;
# 2. round 1 `moert bench --graph --profile` (the block, then each step alone),
#    then interleaved rounds of `moert bench --graph`, the arms' order reversed
#    every other round, while time is left (ROUNDS, default 6; none started
#    past RUN_S, default 80 s; no call past HARD_S, default 100 s);
# 3. a table last: per case and arm the median over the rounds against main,
#    and the STEPS alone.  Writes $OUT/NAME/{plans,same,ab,table}.txt, prof.*.txt.
set -u
field() {	# field KEY SPEC: the spec's lines of KEY, without it
	sed -n "s/^$1[[:space:]][[:space:]]*//p" "$2"
}

if [ "${1:-}" = prepare ]; then
	[ $# = 5 ] || { echo "usage: ab.sh prepare SPEC MOEC MAIN_MOEC DIR" >&2; exit 2; }
	spec=$2 moec=$3 mmoec=$4 dir=$5
	src=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$dir" || exit 1
	model() {	# model PATH: the compile input (@bf16:M made here)
		case $1 in
		@bf16:*)
			m=${1#@bf16:}
			mkdir -p "$tmp/$m-bf16"
			python3 "$src/bench/bf16_config.py" "$src/models/$m/config.json" "$tmp/$m-bf16/config.json" ||
				exit 1
			echo "$tmp/$m-bf16/config.json" ;;
		*) echo "$src/$1" ;;
		esac
	}
	flags() {	# flags ARM: its moec flags, paths made absolute
		field arm "$spec" | awk -v a="$1" '$1 == a {$1 = ""; print}' | sed "s#=bench/#=$src/bench/#g"
	}
	field bundle "$spec" | while read -r b maxt mpath args; do
		m=$(model "$mpath") || exit 1
		arms=$(field case "$spec" | awk -v b="$b" '$2 == b {print $5}' | tr , '\n' | sort -u)
		for a in main $(echo "$arms" | grep -vx main); do
			c=$moec
			[ "$a" = main ] && c=$mmoec
			# shellcheck disable=SC2046,SC2086
			"$c" compile "$m" $args $(flags "$a") --arch=sm_90a --max-tokens="$maxt" --cubin -v \
				-o "$tmp/$a.$b.moeb" >"$tmp/log" 2>&1 || { echo "FAIL $a.$b:"; tail -5 "$tmp/log"; exit 1; }
			grep -q warning "$tmp/log" && { grep warning "$tmp/log"; exit 1; }	# a table line not taken
			grep -E 'on sm_90a: tuning key' "$tmp/log" | sed "s/.*@/$a.$b @/" >>"$dir/plans.txt"
			# ptxas's spills (--cubin): an arm's kernels that spill where main's do not
			"$c" inspect "$tmp/$a.$b.moeb" | grep -E 'spills [1-9]' >"$tmp/spills.$a" || true
			[ "$a" = main ] && [ -s "$tmp/spills.main" ] && echo "NOTE main.$b spills: $(cat "$tmp/spills.main")"
			if [ "$a" != main ] && grep -vxFf "$tmp/spills.main" "$tmp/spills.$a"; then	# (fewer: fine)
				echo "FAIL $a.$b: a kernel spills (main's do not)"
				exit 1
			fi
			if [ "$a" != main ] && cmp -s "$tmp/$a.$b.moeb" "$tmp/main.$b.moeb"; then
				echo "FAIL $a.$b is main's bundle byte for byte (the arm changes nothing)"
				exit 1
			fi
			xz -9 -c "$tmp/$a.$b.moeb" >"$dir/$a.$b.moeb.xz"
			echo "ok   $a.$b ($(wc -c <"$tmp/$a.$b.moeb") bytes, xz $(wc -c <"$dir/$a.$b.moeb.xz"))"
		done
		# shellcheck disable=SC2086
		"$moec" compile "$m" $args --arch=sm_90a --max-tokens="$maxt" --cubin -o "$tmp/x.moeb" >/dev/null 2>&1 &&
			cmp -s "$tmp/x.moeb" "$tmp/main.$b.moeb" &&
			echo "ok   MOEC without flags: $b's bundle is MAIN_MOEC's, byte for byte" ||
			echo "NOTE MOEC without flags: $b's bundle differs from MAIN_MOEC's"
	done || exit 1
	cp "$0" "$dir/run.sh" && cp "$spec" "$dir/spec" || exit 1
	echo "$(du -sk "$dir" | cut -f1) KB in $dir"
	exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
spec=$here/spec
name=$(field name "$spec")
o=${OUT:?}/${name:-ab}
bound=$(field bound "$spec")
steps=$(field steps "$spec")
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$here"/*.moeb.xz; do xz -d -c "$f" >"$tmp/$(basename "$f" .xz)" || exit 1; done
cp "$here/plans.txt" "$o/" 2>/dev/null
sh tests/gpu/build_moert.sh "$tmp/moert" >"$o/build.txt" 2>&1 || { echo "build_moert failed"; cat "$o/build.txt"; exit 1; }
M() { timeout "${TO:-25}" "$tmp/moert" "$@"; }	# a hang costs its timeout, not the call
echo "moert built at $(el) s"

# 1. correctness: y of each arm against main's, the same x
: >"$o/same.txt"
: >"$tmp/bad"
field case "$spec" | while read -r n b t h arms _; do
	python3 -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(7).uniform(-1, 1, ($t, $h)).astype(np.float32))" ||
		exit 1
	for a in $(echo "$arms" | tr , ' '); do
		rm -rf "$tmp/o.$a"
		TO=40 M run "$tmp/$a.$b.moeb" --input=x="$tmp/x.npy" -o "$tmp/o.$a" >"$tmp/err" 2>&1 ||
			echo "same $n $a: moert run FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
		[ "$a" = main ] && continue
		python3 - "$tmp/o.main/y.npy" "$tmp/o.$a/y.npy" "$n" "$a" "${bound:-0}" >>"$o/same.txt" <<'PY' ||
import sys
import numpy as np
n, a, bound = sys.argv[3], sys.argv[4], float(sys.argv[5])
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
ok = np.isfinite(xf).all() and np.isfinite(yf).all() and nz > 0.5 and (same or rel <= bound)
print("same %s %s vs main: %s max_abs=%.3g rel_l2=%.3g nonzero=%.3f" % (n, a, "same bits" if same and ok else
      "DIFFERENT bits, rel_l2 within %g" % bound if ok else "DIFFERENT", np.abs(xf - yf).max(), rel, nz))
sys.exit(0 if ok else 1)
PY
			echo "$n.$a" >>"$tmp/bad"
	done
	echo "correct $n done at $(el) s"
done
cat "$o/same.txt"

# 2. round 1 with the steps alone, then rounds while time is left
bench() {	# bench CASE BUNDLE T SKEW ARM ROUND [flags]: one `moert bench --graph` line into ab.txt
	n=$1 b=$2 t=$3 s=$4 a=$5 r=$6
	shift 6
	if grep -qx "$n.$a" "$tmp/bad"; then us=WRONG; elif [ "$(el)" -ge "${HARD_S:-100}" ]; then us=SKIPPED; else
		M bench "$tmp/$a.$b.moeb" --tokens="$t" --skew="$s" --graph --iters="${ITERS:-50}" --warmup=10 "$@" \
			>"$tmp/b" 2>&1
		us=$(sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p' "$tmp/b")
		[ $# -gt 0 ] && cp "$tmp/b" "$o/prof.$a.$n.txt"
	fi
	echo "ab $n arm=$a round=$r us=${us:-FAILED}" | tee -a "$o/ab.txt"
}
: >"$o/ab.txt"
: >"$o/dump.txt"
dumps=$(field dump "$spec")
r=1
while [ "$r" -le "${ROUNDS:-6}" ] && { [ "$r" = 1 ] || [ "$(el)" -lt "${RUN_S:-80}" ]; }; do
	field case "$spec" >"$tmp/cases"
	while read -r n b t h arms skew; do
		order=$(echo "$arms" | tr , '\n')
		[ $((r % 2)) = 0 ] && order=$(echo "$order" | tac)
		for a in $order; do
			if [ "$r" = 1 ]; then
				df=""
				for d in $dumps; do df="$df --dump=$d=$tmp/d.$n.$a.$d"; done
				# shellcheck disable=SC2086
				TO=40 bench "$n" "$b" "$t" "${skew:-0}" "$a" "$r" --profile $df
			else bench "$n" "$b" "$t" "${skew:-0}" "$a" "$r"; fi
		done
		for a in $order; do	# round 1's dumps against main's, byte for byte
			[ "$r" = 1 ] && [ "$a" != main ] || continue
			for d in $dumps; do
				if [ ! -s "$tmp/d.$n.main.$d" ] || [ ! -s "$tmp/d.$n.$a.$d" ]; then v=MISSING
				elif cmp -s "$tmp/d.$n.main.$d" "$tmp/d.$n.$a.$d"; then v="same bytes"
				else v=DIFFERENT; fi
				echo "dump $n $a $d: $v" >>"$o/dump.txt"
			done
		done
	done <"$tmp/cases"
	echo "round $r done at $(el) s"
	r=$((r + 1))
done

# 3. the table
{
	echo "== plans (tuning keys and variants)"
	cat "$o/plans.txt" 2>/dev/null
	echo "== correctness (y against main's, x uniform in [-1, 1])"
	cat "$o/same.txt"
	cat "$o/dump.txt"
	echo "== blocks (moert bench --graph, median us over the rounds; round 1 ran --profile)"
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
        print("%-14s %-6s %9s%s  rounds %s" % (n, a, "%.1f" % m if m else "-", rel, " ".join(xs)))
PY
	echo "== steps alone (moert bench --profile, us)"
	for f in "$o"/prof.*.txt; do
		[ -f "$f" ] || continue
		echo "$(basename "$f" .txt) $(awk -v re="${steps:-_k[3-6]}(_t[0-9]+_[0-9]+)?\$" \
			'/^profile/ {on = 1; next} on && NF == 3 && $1 ~ re {printf "%s=%s ", $1, $2}' "$f" |
			sed 's/[a-z0-9_]*layer[0-9]*_//g')"
	done
} >"$o/table.txt"
cat "$o/table.txt"
echo "${name:-ab} done at $(el) s"

#!/bin/sh
# prefill (issue 12, session 29) — trimmed to the 50 s batch: expect ~45 s (guard: no new run after 40 s).
# OUT=<dir> sh build/s29/prefill/run.sh, from the root of main's checkout on the H200.
# MoE prefill at T = 4096 (Qwen3-30B-A3B, gpt-oss-20b bf16, Mixtral-8x7B), bench bundles compiled
# with --cubin (no JIT here), xz'd, arms (branch s29-prefill):
#   main  main's moec, default plan
#   ra    the branch's default: grouped WS GEMMs load the epilogue's rows (scatter index, gathered
#         scale, routing weight: loads of loads) before the tile's k-tiles, not row by row after
#         them (the same bits as main expected)
#   sx    ra + --debug=slots-x (new, bit 31): the slots rounded to bf16 in the down GEMM's epilogue,
#         summed in f32 by the combine (half the down's stores and the combine's loads)
#   sxw   sx + wide.tuning: 64x256 warpgroup tiles for the expert GEMMs (Qwen3, Mixtral);
#         gpt-oss's down (15 column tiles: no pairs) persistent over 132 CTAs (.pers)
#   sxp   sx + --debug=ws-pingpong: the gathered gate|up ping-pong 128x128 (with the pairs)
#   sxpw  sxp + wide.tuning: ping-pong 64x256 a warpgroup
# 1. correctness before any timing: each arm's y on one random input against main's bundle
#    (rel_l2 < 1e-2; sx rounds the slots; ra identical expected) and against sx's (the tilings:
#    identical expected);
#    Qwen3 also at T = 16 and 300 (decode and middle plans with slots-x). A wrong arm is not timed.
# 2. a round of moert bench --graph (100 iters) over the arms, interleaved; 3. each arm once with
#    --profile (steps alone); 4. rounds 2..ROUNDS (2). Writes $OUT/prefill/{same,ab,prof,table}.txt; prints the table last.
set -u
here=$(cd "$(dirname "$0")" && pwd)
o=${OUT:?}/prefill
mkdir -p "$o"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
python3 - "$here" "$tmp" <<'PY' || { echo "unpack failed"; exit 1; }
import lzma, os, sys, glob
src, dst = sys.argv[1], sys.argv[2]
for f in glob.glob(src + "/*.moeb.xz"):
    if "mixtral" in f or f.split("/")[-1].startswith("sxp"): continue
    arm, m = os.path.basename(f).split(".")[:2]
    os.makedirs(f"{dst}/{arm}", exist_ok=True)
    open(f"{dst}/{arm}/{m}.moeb", "wb").write(lzma.open(f).read())
PY
sh tests/gpu/build_moert.sh "$tmp/moert" || { echo "build_moert failed"; exit 1; }
moert=$tmp/moert
echo "unpacked and built at $(el) s"
Aqwen3_T4096="main ra sx sxw"
Agptoss_T4096="main sx sxw"
Amixtral_T4096="main ra sx sxw sxp"
Hqwen3_T4096=2048
Hgptoss_T4096=2880
Hmixtral_T4096=4096
CASES="qwen3_T4096 gptoss_T4096"
cmp() {	# cmp REF GOT LABEL: one line, exit 0 when close
	python3 - "$1" "$2" "$3" <<'PY'
import sys
import numpy as np
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
if a.shape == b.shape and np.array_equal(a, b):
    print("same %s identical ok" % sys.argv[3]); sys.exit(0)
a = a.astype(np.float64); b = b.astype(np.float64)
ok = a.shape == b.shape and np.isfinite(b).all()
d = np.abs(a - b) if a.shape == b.shape else np.array([9.9])
rel = float(np.sqrt((d * d).sum() / max((a * a).sum(), 1e-30))) if a.shape == b.shape else 9.9
ok = ok and rel < 1e-2
print("same %s max_abs=%.3g rel_l2=%.3g %s" % (sys.argv[3], d.max(), rel, "ok" if ok else "DIFFERENT"))
sys.exit(0 if ok else 1)
PY
}
: >"$o/same.txt"
for c in $CASES; do
	eval arms=\$A$c H=\$H$c
	for T in 4096; do
		[ "$T" = 4096 ] || [ "$c" = qwen3_T4096 ] || continue
		python3 -c "import numpy as np; np.random.seed(7); \
np.save('$tmp/x.npy', np.random.uniform(-1, 1, ($T, $H)).astype(np.float32))" || exit 1
		ok=""
		for a in $arms; do
			[ "$(el)" -lt 30 ] || break
			[ "$T" = 4096 ] || [ "$a" = main ] || [ "$a" = ra ] || [ "$a" = sx ] || continue
			rm -rf "$tmp/out"; mkdir -p "$tmp/out"
			if ! timeout -k 5 60 "$moert" run "$tmp/$a/$c.moeb" --input=x="$tmp/x.npy" -o "$tmp/out" \
				>/dev/null 2>"$tmp/err"; then
				echo "same $c T=$T $a FAILED: $(head -c 300 "$tmp/err")" >>"$o/same.txt"
				continue
			fi
			if [ "$a" = main ]; then
				mv "$tmp/out/y.npy" "$tmp/ref.npy"; ok=main; continue
			fi
			good=1
			cmp "$tmp/ref.npy" "$tmp/out/y.npy" "$c T=$T $a vs main" >>"$o/same.txt" || good=0
			if [ "$a" = sx ]; then
				mv "$tmp/out/y.npy" "$tmp/sx.npy"
			elif [ -s "$tmp/sx.npy" ]; then
				cmp "$tmp/sx.npy" "$tmp/out/y.npy" "$c T=$T $a vs sx" >>"$o/same.txt" || good=0
			fi
			[ "$good" = 1 ] && ok="$ok $a"
		done
		[ "$T" = 4096 ] && eval ok$c=\"\$ok\"
		rm -f "$tmp/sx.npy"
	done
	echo "correctness $c done at $(el) s"
done
cat "$o/same.txt"
bench() {	# bench ARM CASE [args]: the median us
	a=$1 c=$2; shift 2
	timeout -k 5 40 "$moert" bench "$tmp/$a/$c.moeb" --tokens=4096 --graph --warmup=10 "$@" 2>&1
}
: >"$o/ab.txt"
: >"$o/prof.txt"
round() {	# round R: each case's arms interleaved, one moert bench --graph each
	for c in $CASES; do
		eval arms=\$ok$c
		line="ab $c round=$1"
		for a in $arms; do
			[ "$(el)" -lt 40 ] || break
			us=$(bench "$a" "$c" --iters=100 | sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
			line="$line $a=${us:-FAILED}"
		done
		echo "$line" | tee -a "$o/ab.txt"
	done
}
# round 1, then each arm's steps alone, then round 2 (the guard cuts the last first)
round 1
for c in qwen3_T4096; do
	eval arms=\$ok$c
	for a in $arms; do
		[ "$(el)" -lt 40 ] || break
		bench "$a" "$c" --iters=50 --profile |
			awk -v c="$c" -v a="$a" '/^profile/ {on = 1; next} on && NF == 3 {printf "prof %s %s %s %s\n", c, a, $1, $2}' \
			>>"$o/prof.txt"
	done
done
r=2
while [ "$r" -le "${ROUNDS:-2}" ]; do
	round $r
	r=$((r + 1))
done
awk '
	/^ab / { for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[2] + 0 > 0) { k = $2 SUBSEP kv[1]
		v[k] = v[k] " " kv[2]; if (!(k in seen)) { seen[k] = 1; ord[$2] = ord[$2] " " kv[1]; if (!($2 in cs)) { cs[$2] = 1; co[++nc] = $2 } } } } }
	/^prof / { s = $4; sub(/^.*_/, "", s); if (s == "sum") s = "sum"; p[$2 SUBSEP $3 SUBSEP s] = p[$2 SUBSEP $3 SUBSEP s] " " s "=" $5 }
	function med(s,   n, a, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { for (ci = 1; ci <= nc; ci++) { c = co[ci]; n = split(ord[c], arms, " "); base = med(v[c SUBSEP "main"])
		for (i = 1; i <= n; i++) { x = med(v[c SUBSEP arms[i]])
			printf "%-14s %-5s %8.1f us  vs main %.3f  (%s) |%s%s%s%s\n", c, arms[i], x, x / base, v[c SUBSEP arms[i]],
				p[c SUBSEP arms[i] SUBSEP "k3"], p[c SUBSEP arms[i] SUBSEP "k4"],
				p[c SUBSEP arms[i] SUBSEP "k6"], p[c SUBSEP arms[i] SUBSEP "k7"] } } }
' "$o/ab.txt" "$o/prof.txt" | tee "$o/table.txt"
echo "prefill: done in $(el) s"

#!/bin/sh
# tune_fake.sh MOEC MOERT LIBFAKECUDA SRC — the measured-tile loop end to end
# on the stand-in driver (docs/codegen.md, "Tuning tables"):
#
#	moec compile --tune-candidates   a bundle with candidate kernels per GEMM key
#	moert tune (fakecuda.c)          every candidate checked against the plan and timed;
#	                                 one made 5 ms slow, one made to write a wrong output
#	moec compile --tuning=TABLE      the table's variants replace the heuristic's
#	moec test --emulate --tuning     the tuned plan against the interpreter
#
# The fake's kernels do nothing (FAKECUDA_ANY), so its times are meaningless;
# what is tested is the plumbing: candidate lines, the plan prefix, the
# reference output, the rejection of a wrong candidate, the choice, the
# table's format and its round trip into the compiler.  Exit 0 or 1.
set -u
moec=$1 moert=$2 fake=$3 src=$4
fx=$src/tests/fixtures/hf/qwen2_moe
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "tune_fake: FAIL: $*"; exit 1; }
want_rc() {	# want_rc RC WHAT CMD...
	rc=$1 what=$2
	shift 2
	"$@" >"$d/out" 2>&1
	got=$?
	[ "$got" = "$rc" ] || { cat "$d/out"; fail "$what: exit $got, want $rc"; }
}

# --- refusals: several targets, no candidates, no -o
want_rc 2 "--tune-candidates with two targets" \
	"$moec" compile "$fx" --layer 1 --arch=sm_90a,sm_80 --tune-candidates -o "$d/x.moeb"
grep -q "needs one target" "$d/out" || fail "two targets: $(cat "$d/out")"
[ ! -e "$d/x.moeb" ] || fail "a refused compile wrote its bundle"
"$moec" compile "$fx" --layer 1 --arch=sm_90a --max-tokens=4096 -q -o "$d/plain.moeb" ||
	fail "plain compile"
want_rc 2 "moert tune of a bundle without candidates" env MOERT_LIBCUDA="$fake" \
	"$moert" tune "$d/plain.moeb" -o "$d/none.tuning"
grep -q "no candidate kernels" "$d/out" || fail "no candidates: $(cat "$d/out")"

# --- the candidate bundle: max_tokens 4096, so that its keys are the emulator's
"$moec" compile "$fx" --layer 1 --arch=sm_90a --max-tokens=4096 --tune-candidates -q \
	-o "$d/c.moeb" || fail "compile --tune-candidates"
"$moert" verify "$d/c.moeb" >/dev/null || fail "moert verify of the candidate bundle"
"$moec" inspect "$d/c.moeb" >"$d/inspect" || fail "moec inspect"
grep -q "^tuning candidates: " "$d/inspect" || fail "no candidates listed"
want_rc 2 "moert tune without -o" env MOERT_LIBCUDA="$fake" "$moert" tune "$d/c.moeb"

# the first grouped GEMM's key for the T bucket 17..64: its first candidate is the
# heuristic's own variant (made slow), its second is made to write a wrong output
# ("  NAME for step N (KERNEL), out=J DT, key KEY, variant V"; a GEMM's buckets
# share a candidate kernel where the variant and the workspace agree)
awk '/ key g[0-9]+\..*\.t17-64, / { sub(",", "", $9); print $1, $6, $9, $11 }' \
	"$d/inspect" | head -2 >"$d/pick"
read -r slow out key v0 <"$d/pick"
read -r wrong out2 key2 v1 <<EOF
$(sed -n 2p "$d/pick")
EOF
out=${out#out=}
[ -n "$key" ] && [ "$key" = "$key2" ] && [ "$out" = "${out2#out=}" ] || fail "candidates of $key: $(cat "$d/pick")"
nkeys=$(awk '/ key / && !k[$9]++ { n++ } END { print n + 0 }' "$d/inspect")
[ "$nkeys" -ge 12 ] || fail "only $nkeys tuning keys"
for b in t1-1 t2-16 t17-64 t65-256 t257-1024 t1025-4096; do
	grep -q " key g[0-9]*\..*\.$b, " "$d/inspect" || fail "no candidates for the T bucket $b"
done
# each candidate line of the wrong kernel is timed at one T (each bucket holds one of --tokens)
nwrong=$(awk -v k="$wrong" '$1 == k && / key / { n++ } END { print n + 0 }' "$d/inspect")

for bad in 101 0,0 0,10,20,30,40 x; do
	want_rc 2 "moert tune --skew=$bad" env MOERT_LIBCUDA="$fake" "$moert" tune "$d/c.moeb" \
		-o "$d/bad.tuning" --skew="$bad"
	grep -q "skew" "$d/out" || fail "--skew=$bad: $(cat "$d/out")"
done
# 6 T (1024 added for the 257..1024 bucket) x 2 skews: 12 points
want_rc 2 "moert tune: more than 16 points" env MOERT_LIBCUDA="$fake" "$moert" tune "$d/c.moeb" \
	-o "$d/bad.tuning" --skew=0,20,80
[ ! -e "$d/bad.tuning" ] || fail "a refused moert tune wrote its table"
MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_SLOW=$slow FAKECUDA_WRONG=$wrong:$out \
	"$moert" tune "$d/c.moeb" -o "$d/t.tuning" --tokens=1,16,64,256,4096 --skew=0,80 --flush-mb=0 \
	--iters=3 --warmup=1 >"$d/log" 2>&1 || { cat "$d/log"; fail "moert tune"; }
grep -q "^T=64/skew=80 .* $key .* $v1 .*WRONG: rejected" "$d/log" ||
	{ cat "$d/log"; fail "the wrong candidate was not rejected under skew"; }
nwrong=$((nwrong * 2))	# at each skew
grep -q "^T=64 .* $key .* $v1 .*WRONG: rejected" "$d/log" || { cat "$d/log"; fail "the wrong candidate was not rejected"; }
[ "$(grep -c "WRONG" "$d/log")" = "$nwrong" ] && [ "$(grep "WRONG" "$d/log" | grep -vc " $v1 ")" = 0 ] ||
	fail "rejections other than $wrong's $nwrong: $(grep WRONG "$d/log")"
[ "$(head -1 "$d/t.tuning")" = "moec-tuning 2" ] || fail "table header: $(head -1 "$d/t.tuning")"
[ "$(grep -c '^sm_90a ' "$d/t.tuning")" = "$nkeys" ] || { cat "$d/t.tuning"; fail "not one entry per key ($nkeys)"; }
chosen=$(awk -v k="$key" '$1 == "sm_90a" && $2 == k { print $3 }' "$d/t.tuning")
[ -n "$chosen" ] && [ "$chosen" != "$v0" ] && [ "$chosen" != "$v1" ] ||
	fail "key $key: chose '$chosen' (slow: $v0, wrong: $v1)"
grep -q "^sm_90a $key $chosen us=[0-9.]*$" "$d/t.tuning" || fail "entry spelling: $(grep "$key" "$d/t.tuning")"
grep -q "^# $key (plan .*; T=64 [0-9.]* us (plan [0-9.]*); T=64/skew=80 [0-9.]* us" "$d/t.tuning" ||
	fail "the times at both skews: $(grep "$key" "$d/t.tuning")"

# --- the table back into the compiler: every entry taken, the chosen variant used
"$moec" compile "$fx" --layer 1 --arch=sm_90a --max-tokens=4096 -v --tuning="$d/t.tuning" \
	-o "$d/tuned.moeb" >"$d/tuned.log" 2>&1 || { cat "$d/tuned.log"; fail "compile --tuning"; }
grep -q "$nkeys GEMM tilings taken from the tuning table ($nkeys entries)" "$d/tuned.log" ||
	{ cat "$d/tuned.log"; fail "not every entry taken"; }
grep -q "tuning key $key, variant $chosen (tuning table)" "$d/tuned.log" || fail "key $key not tuned"
grep -q "warning" "$d/tuned.log" && fail "warnings: $(grep warning "$d/tuned.log")"
"$moec" compile "$fx" --layer 1 --arch=sm_90a --max-tokens=4096 -v -o "$d/plain.moeb" \
	>"$d/plain.log" 2>&1 || fail "plain compile -v"
grep -q "tuning key $key, variant $v0 (heuristic)" "$d/plain.log" || fail "heuristic for $key is not $v0"
"$moec" inspect "$d/plain.moeb" | grep "^  launch" >"$d/plan.plain"
"$moec" inspect "$d/tuned.moeb" | grep "^  launch" >"$d/plan.tuned"
cmp -s "$d/plan.plain" "$d/plan.tuned" && fail "the tuned launch plan is the heuristic's"

# --- numerics: the table's entries as the emulator's, against the interpreter
sed 's/^sm_90a /emu /' "$d/t.tuning" >"$d/emu.tuning"
"$moec" test --emulate --layer 1 --tuning="$d/emu.tuning" "$fx" >"$d/emu.log" 2>&1 ||
	{ cat "$d/emu.log"; fail "moec test --emulate --tuning"; }
tail -1 "$d/emu.log" | grep -q " 0 failed" || fail "emulated: $(tail -1 "$d/emu.log")"
echo "tune_fake: ok ($nkeys keys; $key: $chosen over the heuristic's $v0)"

#!/bin/sh
# route_fake.sh CHECK MOERT LIBFAKECUDA — moert test telling a routing flip
# from a wrong kernel for a router that ranks sigmoid(logit) + a selection
# bias (DeepSeek-V3, Kimi, GLM, Step), on the stand-in driver (fakecuda.c):
# `gpu_runtime_check --emit-route` writes a bundle whose route line says
# select=sigmoid bias=w:sb (the bias generated on the device at load) and
# four cases.  A flip at a near tie of the scores (the logits 1.28 apart) is
# reported and its row left out, against the reference's routing (ref) and
# on the device's own scores (bare); a wrong row with a clear choice (far)
# and a flip beyond a near tie (wrong) still fail; a route line with a bad
# select= is refused naming it (exit 2).  GPU version:
# routing_flip.sh.  Exit 0 or 1.
set -u
check=$1 moert=$2 fake=$3
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "route_fake: FAIL: $*"; exit 1; }
MOERT_LIBCUDA=/nonexistent "$check" --emit-route "$d" >/dev/null || fail "--emit-route"
t() { MOERT_LIBCUDA=$fake "$moert" test "$d/route.moeb" "$d/$1" >"$d/$1.out" 2>&1; }
t ref || fail "ref: $(cat "$d/ref.out")"
grep -q "routing: token 1: experts {0,3} vs {0,1}, score gap 0.0002 (a near tie); rows left out;" \
	"$d/ref.out" || fail "ref: $(cat "$d/ref.out")"
t bare || fail "bare: $(cat "$d/bare.out")"
grep -q "routing: token 1: experts {0,1}, expert 3 within 0.0002 of 1: a near tie; rows left out;" \
	"$d/bare.out" || fail "bare: $(cat "$d/bare.out")"
t far && fail "far passed: $(cat "$d/far.out")"
grep -q "^FAIL .*y: rel_l2 .* (1 outside tolerance)" "$d/far.out" || fail "far: $(cat "$d/far.out")"
grep -q "routing" "$d/far.out" && fail "far: a clear choice put down to routing: $(cat "$d/far.out")"
t wrong && fail "wrong passed: $(cat "$d/wrong.out")"
grep -q "token 2: experts {2,3} vs {0,1}, score gap 0.52 (beyond a near tie); (routing differs)" \
	"$d/wrong.out" || fail "wrong: $(cat "$d/wrong.out")"
# a route line naming no ranking: refused, the field named, exit 2
"$moert" verify "$d/bad.moeb" >"$d/bad.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "bad.moeb: exit $rc: $(cat "$d/bad.out")"
grep -q "bad.moeb\[manifest\]:20:77: error: select 'tanh': logit, sigmoid or softmax" "$d/bad.out" ||
	fail "bad.moeb: $(cat "$d/bad.out")"
echo "route_fake: ok"

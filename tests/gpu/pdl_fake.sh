#!/bin/sh
# pdl_fake.sh MOEC MOERT LIBFAKECUDA SRC — programmatic dependent launch
# (--debug=pdl, docs/runtime.md) through the bundle and the runtime, on the
# stand-in driver (fakecuda.c, a 9.0 device): Qwen3-30B-A3B's decode block
# compiled with the flag has every sm_90a kernel open with griddepcontrol
# (7 kernels, 6 with --debug=combine-fold's default: as many waits and
# launch_dependents in the PTX) and say pdl=1, no
# kernel prefetches weights toward L2 (the front's prefetch measured a loss:
# Qwen3-30B-A3B T = 1 98 us against 33), and moert launches each of its run steps (front, gate|up, down, combine) with
# cuLaunchKernelEx's programmatic stream serialization, plainly and as a
# CUDA graph; the same without the flag (the default of decode bundles);
# above max_tokens 64 without the flag, and for sm_80 code (no griddepcontrol,
# no pdl=1 lines), nothing is launched so.  The fake's kernels write nothing,
# so bench's output check fails: what is tested is the launch (the fake
# logs each programmatic one).  Exit 0 or 1.
set -u
moec=$1 moert=$2 fake=$3 src=$4
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "pdl_fake: FAIL: $*"; exit 1; }
cfg=$src/models/qwen3-30b-a3b/config.json
one() {	# one NAME MAX_TOKENS FLAGS...: compile
	n=$1 mt=$2
	shift 2
	"$moec" compile "$cfg" --layer 0 --synthetic-weights=1 --max-tokens=$mt -q "$@" -o "$d/$n.moeb" ||
		fail "compile $n"
	"$moert" verify "$d/$n.moeb" >/dev/null || fail "moert verify $n"
}
one pdl 1 --arch=sm_90a --debug=pdl
one default 1 --arch=sm_90a	# the default for decode bundles (max_tokens <= 64)
one plain 65 --arch=sm_90a	# not above
one pdl80 1 --arch=sm_80 --debug=pdl
"$moec" compile "$cfg" --layer 0 --synthetic-weights=1 --max-tokens=1 -q --arch=sm_90a --debug=pdl --emit=ptx \
	-o "$d/pdl.ptx" || fail "compile --emit=ptx"
# every kernel (7; 6 where the down runs the combine: --debug=combine-fold) opens with both
nk=$(grep -c '^.visible .entry' "$d/pdl.ptx")
[ "$nk" -ge 6 ] || fail "$nk kernels in the PTX"
[ "$(grep -c 'griddepcontrol.wait;' "$d/pdl.ptx")" = "$nk" ] || fail "griddepcontrol.wait: $(grep -c griddepcontrol.wait "$d/pdl.ptx") of $nk"
[ "$(grep -c 'griddepcontrol.launch_dependents;' "$d/pdl.ptx")" = "$nk" ] || fail "launch_dependents"
run_k="k1_front k3 k4"	# the run steps, and the combine unless the down runs it
grep -q 'qwen3_moe_layer0_k7' "$d/pdl.ptx" && run_k="$run_k k7"
# no bulk prefetch toward L2 (the front's, removed in session 31: a loss)
[ "$(grep -c 'cp.async.bulk.prefetch' "$d/pdl.ptx")" = 0 ] || fail "a bulk prefetch in the PTX"
for n in pdl default plain pdl80; do
	for g in "" --graph; do
		rm -f "$d/log"
		MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_PDL_LOG=$d/log \
			"$moert" bench "$d/$n.moeb" --tokens=1 --iters=1 --warmup=0 $g >"$d/out" 2>&1
		grep -q "never written" "$d/out" || fail "$n $g: $(cat "$d/out")"
		if [ $n = pdl ] || [ $n = default ]; then
			for k in $run_k; do
				grep -qx "qwen3_moe_layer0_$k" "$d/log" || fail "$n $g: $k not launched programmatically"
			done
		else
			[ ! -s "$d/log" ] || fail "$n $g: programmatic launches: $(cat "$d/log")"
		fi
	done
done
# --debug=kept-flags: the front's flag memset says when=shared, so moert
# zeroes its bytes (512) once at load and never in a run on its own arena
# (plain or graph); sm_80's bundle (no griddepcontrol, so not marked by
# the decode default either) zeroes them every run
one kept 1 --arch=sm_90a --debug=kept-flags
grep -q "when=shared" "$d/kept.moeb" || fail "kept: no when=shared memset"
! grep -q "when=shared" "$d/pdl80.moeb" || fail "pdl80: a when=shared memset"
for n in pdl80 kept; do
	for g in "" --graph; do
		rm -f "$d/mlog"
		MOERT_LIBCUDA=$fake FAKECUDA_ANY=1 FAKECUDA_MEMSET_LOG=$d/mlog \
			"$moert" bench "$d/$n.moeb" --tokens=1 --iters=3 --warmup=0 $g >"$d/out" 2>&1
		by=$(grep -a -o 'memset buf:splitk\$ws bytes=[0-9]*' "$d/$n.moeb" | sed 's/.*=//')
		z=$(grep -c "^memset $by 0$" "$d/mlog")
		if [ $n = kept ]; then [ "$z" = 1 ] || fail "kept $g: $z memsets of the flags, not 1 (the load's)"
		else [ "$z" -ge 2 ] || fail "$n $g: $z memsets of the flags (bench runs the plan twice)"; fi
	done
done
echo "pdl_fake: ok"

#!/bin/sh
# valgrind.sh SRCDIR BUILDDIR — the main command-line paths under valgrind
# (memcheck, --leak-check=full: definite and possible leaks are errors; the
# memory libLLVM's static constructors keep reachable is not) on small
# fixtures: moec import, opt, run, test (interpreter and compiled), compile;
# moert verify, and moert run as far as it goes without a GPU (the bundle
# and inputs are read and checked, then the driver is refused).  Exit 0 when
# every command is clean and exits as expected; 77 (skipped) without valgrind.
src=$1 build=$2
command -v valgrind >/dev/null 2>&1 || { echo "valgrind not installed: skipped"; exit 77; }
moec=$build/tools/moec moert=$build/tools/moert
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
case=$src/tests/onnx/cases/einsum_inner
fail=0
n=0
vg() {	# vg EXPECTED_EXIT NAME CMD...: run CMD under memcheck
	want=$1 name=$2
	shift 2
	n=$((n + 1))
	valgrind -q --error-exitcode=99 --leak-check=full --track-origins=yes \
		--log-file="$tmp/$name.vg" "$@" >"$tmp/$name.out" 2>&1
	rc=$?
	if [ $rc -eq 99 ] || [ -s "$tmp/$name.vg" ]; then
		echo "FAIL $name: valgrind reports errors:"
		head -40 "$tmp/$name.vg"
		fail=1
	elif [ $rc -ne "$want" ]; then
		echo "FAIL $name: exit $rc, expected $want"
		tail -5 "$tmp/$name.out"
		fail=1
	else
		echo "ok   $name"
	fi
}
vg 0 import "$moec" import "$src/tests/fixtures/hf/mixtral/config.json" --layer 1 -o "$tmp/m.ir"
vg 0 import-onnx "$moec" import "$case/model.onnx" -o "$tmp/e.ir"
vg 0 opt "$moec" opt "$tmp/m.ir" --check-eval -o "$tmp/m.opt.ir"
vg 2 opt-bad "$moec" opt "$src/tests/diag/many-errors.ir"
mkdir -p "$tmp/run"
vg 0 run "$moec" run "$case" --input "x0=$case/test_data_set_0/input_0.pb" \
	--input "x1=$case/test_data_set_0/input_1.pb" -o "$tmp/run"
vg 0 test "$moec" test "$case"
vg 0 test-compiled "$moec" test --compiled "$case"
# two targets: their LLVM on two threads, each ptxas started from a batch
vg 0 compile "$moec" compile "$case" --arch=sm_80,sm_90a --max-tokens=16 -o "$tmp/e.moeb"
vg 0 verify "$moert" verify "$tmp/e.moeb"
printf 'garbage' > "$tmp/bad.moeb"
vg 2 verify-bad "$moert" verify "$tmp/bad.moeb"
MOERT_LIBCUDA=/nonexistent/libcuda.so.1 vg 1 moert-run "$moert" run "$tmp/e.moeb" --tokens=1 \
	--input "x0=$case/test_data_set_0/input_0.pb" --input "x1=$case/test_data_set_0/input_1.pb" \
	-o "$tmp/rt"
echo "valgrind: $n commands, $([ $fail -eq 0 ] && echo "all clean" || echo "FAILURES")"
exit $fail

#!/bin/sh
# run_gpu_check.sh — build the runtime, the moert CLI and gpu_runtime_check
# with plain gcc (no CMake), run the check on this machine's GPU, then drive
# the CLI over the bundle the check emits.  Prints a summary line per step.
#
#	tests/gpu/run_gpu_check.sh [BUILDDIR]     (default /tmp/moert-gpu)
# Exit 0 all passed, 1 something failed, 77 no GPU or no driver.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${1:-/tmp/moert-gpu}
CC=${CC:-gcc}
command -v "$CC" >/dev/null 2>&1 || CC=cc
CFLAGS="-std=c17 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iutil -Ibundle -Iruntime"
SRC="util/*.c bundle/*.c runtime/*.c"
mkdir -p "$B" || exit 1

# shellcheck disable=SC2086
$CC $CFLAGS -o "$B/gpu_runtime_check" tests/gpu/gpu_runtime_check.c $SRC -ldl -lpthread -lm &&
tests/gpu/build_moert.sh "$B/moert" &&
$CC $CFLAGS -o "$B/serve_check" tests/gpu/serve_check.c $SRC -ldl -lpthread -lm &&
$CC $CFLAGS -Iruntime -o "$B/embed" examples/embed.c $SRC -ldl -lpthread -lm &&
$CC $CFLAGS -shared -fPIC -fvisibility=default -Wl,--version-script=runtime/moert.map \
	-o "$B/libmoert.so" $SRC -ldl -lpthread -lm || { echo "FAIL build"; exit 1; }
echo "ok   build ($CC): $B/gpu_runtime_check, $B/moert, $B/serve_check, $B/embed, $B/libmoert.so"

fail=0
step() {	# step NAME EXPECTED-RC COMMAND...
	name=$1 want=$2
	shift 2
	"$@" >"$B/$name.log" 2>&1
	rc=$?
	if [ "$rc" = "$want" ]; then echo "ok   $name (rc $rc)"; else echo "FAIL $name (rc $rc, want $want)"; fail=1; fi
	sed 's/^/     /' "$B/$name.log" | tail -n 40
}

"$B/gpu_runtime_check" --emit "$B/emit" >"$B/check.log" 2>&1
rc=$?
sed 's/^/     /' "$B/check.log"
if [ "$rc" = 77 ]; then echo "SKIP no GPU"; exit 77; fi
if [ "$rc" = 0 ]; then echo "ok   gpu_runtime_check"; else echo "FAIL gpu_runtime_check (rc $rc)"; fail=1; fi

M="$B/moert"
E="$B/emit"
step info 0 "$M" info
step verify 0 "$M" verify "$E/check.moeb"
step test 0 "$M" test "$E/check.moeb" "$E/case"
step test-graph 0 "$M" test "$E/check.moeb" "$E/case" --graph
step run 0 "$M" run "$E/check.moeb" --input "x=$E/case/test_data_set_0/input_0.pb" -o "$B"
step bench 0 "$M" bench "$E/check.moeb" --tokens=1000 --iters=200
step bench-graph 0 "$M" bench "$E/check.moeb" --tokens=1000 --iters=200 --graph
step tokens-refused 2 "$M" bench "$E/check.moeb" --tokens=1001
# the serving API: bound weights, shared workspaces, 8 threads (runtime.md §3a)
step serve_check 0 "$B/serve_check" "$E/check.moeb"
printf '\005\000\000\000\006\000\000\000\007\000\000\000\010\000\000\000' >"$B/inc.bin"
step embed 0 "$B/embed" "$E/check.moeb" --tokens=5 --bind "inc=$B/inc.bin"
# memcheck where the sanitizer works (not under gVisor): reported, not fatal
PATH=$PATH:/usr/local/cuda/bin
if command -v compute-sanitizer >/dev/null 2>&1; then
	compute-sanitizer --tool memcheck --error-exitcode 9 "$M" test \
		"$E/check.moeb" "$E/case" --graph >"$B/sanitizer.log" 2>&1
	echo "note compute-sanitizer memcheck: rc $?"
	tail -n 5 "$B/sanitizer.log" | sed 's/^/     /'
fi
[ "$fail" = 0 ] && echo "run_gpu_check: all passed" || echo "run_gpu_check: FAILED"
exit "$fail"

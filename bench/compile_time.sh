#!/bin/sh
# bench/compile_time.sh — how long `moec compile` takes, measured the same way every time.
#
#	bench/compile_time.sh [BUILD] [RUNS]        (default build/, 5 runs)
#
# For each case: RUNS cold compiles (no --cache-dir) of the default targets (sm_90a,sm_80), each timed
# with /usr/bin/time: wall (real), user and sys CPU of moec and its ptxas children together.  It prints
# every run and the minimum and median of each column, then the same compile under `taskset -c 0,1`
# (two cores, whatever the machine has), and the load average before and after: wall time depends on
# what else runs, CPU time (user+sys) much less, so both are reported (docs/codegen.md, "Compile time").
# With MOEC_TIME_VERBOSE=1, one more run per case prints --time-passes and -v's per-target LLVM time and
# ptxas's per-kernel times.  Not a test: nothing here fails on a slow machine.
set -eu
BUILD=${1:-build}
RUNS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MOEC=$BUILD/tools/moec
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

[ -x "$MOEC" ] || { echo "no $MOEC (build first, or give the build folder)" >&2; exit 2; }

# one case: NAME, then moec's arguments after `compile`
measure() {
	name=$1
	shift
	for pin in "" "taskset -c 0,1"; do
		: >"$TMP/t"
		i=0
		while [ $i -lt "$RUNS" ]; do
			/usr/bin/time -f "%e %U %S" -a -o "$TMP/t" $pin "$MOEC" compile "$@" \
				-o "$TMP/out.moeb" -q >/dev/null
			i=$((i + 1))
		done
		awk -v name="$name" -v pin="${pin:-any cores}" '
			{ r[NR] = $1; u[NR] = $2; s[NR] = $3; c[NR] = $2 + $3
			  printf "  %-28s run %d: %6.2f s wall  %6.2f s user  %5.2f s sys  %6.2f s CPU\n", name, NR, $1, $2, $3, $2 + $3 }
			function sort(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
			END { sort(r, NR); sort(c, NR); sort(u, NR)
			      printf "%-30s %-15s wall min %.2f median %.2f s   CPU (user+sys) min %.2f median %.2f s\n",
			             name, "(" pin ")", r[1], r[int((NR + 1) / 2)], c[1], c[int((NR + 1) / 2)] }' "$TMP/t"
	done
	if [ "${MOEC_TIME_VERBOSE:-0}" = 1 ]; then
		"$MOEC" compile "$@" -o "$TMP/out.moeb" --time-passes -v 2>&1 |
			grep -E "^note: (codegen|ptxas)|^#  .*(codegen|ptxas|total|import|passes|write)$" || true
	fi
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)   cores: $(nproc)   ptxas: $(command -v ptxas || echo /usr/local/cuda/bin/ptxas)"
measure "mixtral-8x7b layer 0" "$ROOT/models/mixtral-8x7b" --synthetic-weights=1
if [ "${MOEC_TIME_WHOLE:-0}" = 1 ]; then	# about half a minute a run
	RUNS=1 measure "deepseek-v3 --layers=all" "$ROOT/models/deepseek-v3" --layers=all --synthetic-weights=1
fi
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

#!/bin/sh
# gpu_fixtures.sh BUNDLEDIR — on a GPU machine: build moert with plain gcc
# and run every bundle of make_bundles.sh with `moert test`: against its
# fixture's reference outputs (the exporter's: plain and as a CUDA graph) and
# against the interpreter's outputs for the same inputs.  Prints a table.
# JOBS=N (environment, default 1): N shards of the list at once, each its own
# moert process per bundle (a run is mostly context set-up: 4 shards take the
# 244 bundles of session 35 in 136 s on the H200); the tables are joined.
# Exit 0 all passed, 1 a mismatch, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$(cd "$1" && pwd) || exit 2
B=${BUILD:-/tmp/moert-fixtures}
if [ "${JOBS:-1}" -gt 1 ]; then
	mkdir -p "$B" || exit 1
	i=0 pids=
	while [ $i -lt "$JOBS" ]; do	# shard i: the bundles' folder with list i
		mkdir -p "$B/shard$i" && ln -sf "$dir"/* "$B/shard$i/" && rm -f "$B/shard$i/list.txt"
		awk -v i=$i -v n="$JOBS" 'NR % n == i' "$dir/list.txt" >"$B/shard$i/list.txt"
		JOBS=1 BUILD="$B/run$i" sh "$0" "$B/shard$i" >"$B/shard$i.txt" 2>&1 &
		pids="$pids $!" i=$((i + 1))
	done
	rc=0
	for p in $pids; do wait "$p" || rc=1; done
	cat "$B"/shard*.txt | grep -v '^gpu fixtures:'
	cat "$B"/shard*.txt | awk '/^gpu fixtures:/ {p += $3; f += $5} END {printf "gpu fixtures: %d passed, %d failed\n", p, f}'
	grep -q 'SKIP no GPU' "$B/shard0.txt" && exit 77
	exit $rc
fi
tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 1; }
"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
"$B/moert" info
pass=0 fail=0
worst() {	# the largest rel_l2 in a moert test log
	grep -o 'rel_l2 [0-9.e+-]*' "$1" | sort -k2 -g | tail -1 | cut -d' ' -f2
}
printf '%-28s %-6s %-6s %-6s %-16s %s\n' fixture plain graph interp "rel_l2 exporter" "rel_l2 interpreter"
while read -r bundle fixture ref; do
	name=${bundle%.moeb}
	"$B/moert" test "$dir/$bundle" "$fixture" > "$B/$name.log" 2>&1; a=$?
	"$B/moert" test "$dir/$bundle" "$fixture" --graph > "$B/$name.graph.log" 2>&1; g=$?
	"$B/moert" test "$dir/$bundle" "$dir/$ref" > "$B/$name.interp.log" 2>&1; r=$?
	[ $a = 0 ] && ra=ok || ra=FAIL
	[ $g = 0 ] && rg=ok || rg=FAIL
	[ $r = 0 ] && rr=ok || rr=FAIL
	printf '%-28s %-6s %-6s %-6s %-16s %s\n' "$name" "$ra" "$rg" "$rr" \
		"$(worst "$B/$name.log")" "$(worst "$B/$name.interp.log")"
	if [ $a = 0 ] && [ $g = 0 ] && [ $r = 0 ]; then pass=$((pass + 1)); else
		fail=$((fail + 1)); cat "$B/$name.log" "$B/$name.graph.log" "$B/$name.interp.log" | grep -v '^ok' | sed 's/^/     /' | head -8; fi
done < "$dir/list.txt"
echo "gpu fixtures: $pass passed, $fail failed"
[ $fail = 0 ]

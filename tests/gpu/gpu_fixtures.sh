#!/bin/sh
# gpu_fixtures.sh BUNDLEDIR — on a GPU machine: build moert with plain gcc
# and run every bundle of make_bundles.sh with `moert test`: against its
# fixture's reference outputs (the exporter's: plain and as a CUDA graph) and
# against the interpreter's outputs for the same inputs.  Prints a table.
# Exit 0 all passed, 1 a mismatch, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$1
B=${BUILD:-/tmp/moert-fixtures}
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

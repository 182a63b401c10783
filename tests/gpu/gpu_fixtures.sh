#!/bin/sh
# gpu_fixtures.sh BUNDLEDIR — on a GPU machine: build moert with plain gcc
# and run every bundle of make_bundles.sh against its fixture's reference
# outputs with `moert test` (plain and as a CUDA graph).  Prints a table.
# Exit 0 all passed, 1 a mismatch, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$1
B=${BUILD:-/tmp/moert-fixtures}
CC=${CC:-gcc}
mkdir -p "$B"
$CC -std=c17 -O2 -D_GNU_SOURCE -Iutil -Ibundle -Iruntime -o "$B/moert" tools/moert.c \
	util/*.c bundle/*.c runtime/*.c -ldl -lpthread -lm || { echo "FAIL build"; exit 1; }
"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
"$B/moert" info
pass=0 fail=0
printf '%-28s %-6s %-6s %s\n' fixture plain graph "worst output (plain run)"
while read -r bundle fixture; do
	name=${bundle%.moeb}
	"$B/moert" test "$dir/$bundle" "$fixture" > "$B/$name.log" 2>&1; a=$?
	"$B/moert" test "$dir/$bundle" "$fixture" --graph > "$B/$name.graph.log" 2>&1; g=$?
	worst=$(grep -o 'rel_l2 [0-9.e+-]*' "$B/$name.log" | sort -k2 -g | tail -1)
	[ $a = 0 ] && ra=ok || ra=FAIL
	[ $g = 0 ] && rg=ok || rg=FAIL
	printf '%-28s %-6s %-6s %s\n' "$name" "$ra" "$rg" "$worst"
	if [ $a = 0 ] && [ $g = 0 ]; then pass=$((pass + 1)); else
		fail=$((fail + 1)); sed 's/^/     /' "$B/$name.log" | head -8; fi
done < "$dir/list.txt"
echo "gpu fixtures: $pass passed, $fail failed"
[ $fail = 0 ]

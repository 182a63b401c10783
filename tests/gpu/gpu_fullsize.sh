#!/bin/sh
# gpu_fullsize.sh DIR — on a GPU machine: the full-size check prepared by
# make_fullsize.sh.  Builds moert with plain gcc, then runs each bundle with
# `moert test --tile=1,7,16,64,65,256,1000,4096` on its uniform and skewed
# reference rows (each set repeated to every T; every row compared with the
# interpreter's output for it, at the bf16 tolerance), plainly and as a CUDA
# graph.  Prints one line per case and T, then a table.  Exit 0 all passed,
# 1 a mismatch, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$1
B=${BUILD:-/tmp/moert-fullsize}
TILES=${TILES:-1,7,16,64,65,256,1000,4096}
tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 1; }
"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
"$B/moert" info
pass=0 fail=0
: > "$B/table"
while read -r name model layer; do
	sets=
	for s in uniform skewed; do [ -d "$dir/$name/$s" ] && sets="$sets $dir/$name/$s"; done
	if [ -z "$sets" ]; then
		printf '%-16s %-22s %-5s %s\n' "$name" "$model/$layer" "-" "no reference rows" >> "$B/table"
		continue
	fi
	t0=$(date +%s)
	# shellcheck disable=SC2086
	"$B/moert" test "$dir/$name.moeb" $sets --tile="$TILES" > "$B/$name.log" 2>&1; a=$?
	# shellcheck disable=SC2086
	"$B/moert" test "$dir/$name.moeb" $sets --tile="$TILES" --graph > "$B/$name.graph.log" 2>&1; g=$?
	sed 's/^/  /' "$B/$name.log" | grep -v ' passed, '
	worst=$(cat "$B/$name.log" "$B/$name.graph.log" | grep -o 'rel_l2 [0-9.e+-]*' | cut -d' ' -f2 | sort -g | tail -1)
	ok=$(cat "$B/$name.log" "$B/$name.graph.log" | grep -c '^ok')
	all=$(cat "$B/$name.log" "$B/$name.graph.log" | grep -c '^ok\|^FAIL')
	[ $a = 0 ] && [ $g = 0 ] && r=ok || r=FAIL
	printf '%-16s %-22s %-5s %-9s %-12s %s\n' "$name" "$model/$layer" "$r" "$ok/$all" \
		"${worst:--}" "$(($(date +%s) - t0))" >> "$B/table"
	if [ $r = ok ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		cat "$B/$name.log" "$B/$name.graph.log" | grep -v '^ok' | head -8
	fi
done < "$dir/list.txt"
echo
echo "full-size check: T in {$TILES}, uniform and skewed rows, plain and as a CUDA graph"
printf '%-16s %-22s %-5s %-9s %-12s %s\n' case model/layer ok cases "worst rel_l2" seconds
cat "$B/table"
echo "gpu fullsize: $pass passed, $fail failed"
[ $fail = 0 ]

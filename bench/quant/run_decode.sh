#!/bin/sh
# run_decode.sh DIR — on the GPU machine: every bundle of make_decode.sh
# (DIR/cases.txt) benched at T=16 as a CUDA graph (moert bench --graph, 300
# iterations), then a table: median µs, GB/s over the bundle's weight bytes
# (packed for the quantised cases; for MoE blocks every expert counts, also
# those no token picked), and the speedup over its bf16 pair.  Builds moert
# with tests/gpu/build_moert.sh.  Exit 0, 1 a bench failed, 77 no GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=$1
B=${BUILD:-/tmp/moert-decode}
tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build"; exit 1; }
"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
"$B/moert" info
rc=0
: > "$B/us"
while read -r name bundle pair; do
	if "$B/moert" bench "$dir/$bundle" --tokens=16 --iters=300 --graph > "$B/$name.log" 2>&1; then
		line=$(grep '^bench ' "$B/$name.log")
		us=$(echo "$line" | grep -o 'median_us=[0-9.]*' | cut -d= -f2)
		gb=$(echo "$line" | grep -o 'gbps=[0-9.]*' | cut -d= -f2)
		echo "$name $us $gb $pair" >> "$B/us"
	else
		echo "FAIL $name"; tail -3 "$B/$name.log"; rc=1
	fi
done < "$dir/cases.txt"
printf '%-34s %10s %10s %s\n' case "us (T=16)" "GB/s" "vs bf16"
while read -r name us gb pair; do
	base=$(awk -v p="$pair" '$1 == p { print $2 }' "$B/us")
	x=-
	[ -n "$base" ] && x=$(awk -v a="$base" -v b="$us" 'BEGIN { printf "%.2fx", a / b }')
	printf '%-34s %10s %10s %s\n' "$name" "$us" "$gb" "$x"
done < "$B/us"
exit $rc

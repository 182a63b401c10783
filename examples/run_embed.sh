#!/bin/sh
# run_embed.sh EMBED GPU_RUNTIME_CHECK LIBFAKECUDA — run examples/embed.c on
# gpu_runtime_check's bundle with the stand-in driver, its real weight `inc`
# bound from a file ({5,6,7,8}: every n is 24*(5+6+7+8) = 624), and check
# what it printed: two layers chained, one workspace, the graph replay equal.
embed=$1 grc=$2 fake=$3
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
MOERT_LIBCUDA=/nonexistent "$grc" --emit "$tmp" >/dev/null
[ -f "$tmp/check.moeb" ] || { echo "no bundle"; exit 1; }
printf '\005\000\000\000\006\000\000\000\007\000\000\000\010\000\000\000' >"$tmp/inc.bin"
MOERT_LIBCUDA=$fake "$embed" "$tmp/check.moeb" --tokens=5 --bind "inc=$tmp/inc.bin" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || exit 1
for want in "bound inc i32 (16 bytes)" "one workspace of 4000 bytes" "layer 2 reads layer 1's output" \
	"n i32[5]: 624 624 624 624 ..." "graph replay matches the plain run"; do
	grep -qF -- "$want" "$tmp/out" || { echo "FAIL: missing: $want"; exit 1; }
done
echo "ok   example embed"

#!/bin/sh
# check.sh MOEC DIR: the MoE block of DIR (a config whose K takes direct
# quantised B, synthetic weights) compiled for sm_90a with --debug=bq-direct
# plans both expert GEMMs' decode variants (T <= 16) with direct B (tuning
# variants ending in .d) and their PTX loads the packed words with
# ld.global.nc.L1::no_allocate; by default neither (B staged); a tuning
# table's .d gives direct B without the flag.  Exit 0 when all hold.
moec=$1 dir=$2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $dir: $*"; exit 1; }
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a --max-tokens=16 -v \
	--debug=bq-direct --emit=ptx -o "$tmp/a.ptx" >"$tmp/a.txt" 2>&1 || fail "compile with bq-direct"
n=$(grep -c 'k[34] on sm_90a: tuning key .*\.t2-16, variant .*\.d (heuristic)' "$tmp/a.txt")
[ "$n" = 2 ] || fail "$n decode GEMMs with direct B, want 2 (gate|up, down)"
grep -q 'ld.global.nc.L1::no_allocate.v2.u32' "$tmp/a.ptx" || fail "no lane-vector loads in the PTX"
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a --max-tokens=16 -v \
	--emit=ptx -o "$tmp/b.ptx" >"$tmp/b.txt" 2>&1 || fail "compile for sm_90a"
grep -q 'variant .*\.d (heuristic)' "$tmp/b.txt" && fail "default: a direct plan"
grep -q 'ld.global.nc.L1::no_allocate' "$tmp/b.ptx" && fail "default: direct loads in the PTX"
# a tuning table's .d: direct or staged per key, whatever the heuristic's choice
key=$(sed -n 's/.*k3 on sm_90a: tuning key \([^ ]*\.t2-16\), variant \([^ ]*\)\.d (heuristic).*/\1 \2/p' "$tmp/a.txt")
set -- $key
printf 'moec-tuning 2\nsm_90a %s %s\n' "$1" "$2" > "$tmp/t.tuning"
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a --max-tokens=16 -v \
	--debug=bq-direct --tuning="$tmp/t.tuning" -o "$tmp/c.moeb" >"$tmp/c.txt" 2>&1 || fail "compile with a table"
grep -q "k3 on sm_90a: tuning key $1, variant $2 (tuning table)" "$tmp/c.txt" || fail "the table's staged variant not taken"
printf 'moec-tuning 2\nsm_90a %s %s.d\n' "$1" "$2" > "$tmp/t.tuning"
"$moec" compile "$dir/config.json" --layer 1 --synthetic-weights=7 --arch=sm_90a --max-tokens=16 -v \
	--tuning="$tmp/t.tuning" -o "$tmp/d.moeb" >"$tmp/d.txt" 2>&1 || fail "compile with a table"
grep -q "k3 on sm_90a: tuning key $1, variant $2.d (tuning table)" "$tmp/d.txt" || fail "the table's direct variant not taken"
echo "ok $dir: both decode GEMMs on direct B with bq-direct, none by default; a table's .d taken"

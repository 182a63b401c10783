#!/bin/sh
# tune_bench.sh BUNDLEDIR OUTDIR [moert tune options] — on the GPU machine:
# `moert tune` every bundle of BUNDLEDIR/cases.txt (compiled here with
# MOEC_FLAGS=--tune-candidates sh bench/make_bench.sh MOEC BUNDLEDIR), each
# table and log in OUTDIR/NAME.tuning and NAME.tune.log, then all tables
# merged into OUTDIR/tuning (the first entry of a target and key wins), for
# MOEC_FLAGS=--tuning=OUTDIR/tuning sh bench/make_bench.sh here.  moert is
# built with tests/gpu/build_moert.sh.  Exit 1 if a tune failed (the others
# still run and merge).
set -u
dir=$1 out=$2
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
rc=0
while read -r name bundle _; do
	[ -n "$name" ] || continue
	echo "--- moert tune $bundle $*"
	if "$tmp/moert" tune "$dir/$bundle" -o "$out/$name.tuning" "$@" >"$out/$name.tune.log" 2>&1; then
		grep -v '^T=' "$out/$name.tune.log"
	else
		tail -20 "$out/$name.tune.log"
		rc=1
	fi
done <"$dir/cases.txt"
{
	echo "moec-tuning 2"
	for t in "$out"/*.tuning; do
		[ -f "$t" ] && grep -v '^moec-tuning' "$t"
	done | awk '/^#/ { print; next } !seen[$1 " " $2]++'
} >"$tmp/merged" && mv "$tmp/merged" "$out/tuning"
echo "merged: $out/tuning ($(grep -c '^sm_' "$out/tuning") entries)"
exit $rc

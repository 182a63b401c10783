#!/bin/sh
# rows_ab.sh here MOEC [MOEC_MAIN] OUTDIR | device BUNDLEDIR OUTDIR — the A/B of
# the prefill row kernels (docs/codegen.md, "Permutation" and "The combine"):
# Qwen3-30B-A3B, DeepSeek-V3 (bf16) and gpt-oss-20b (bf16), bundles of
# max_tokens 4096, run at each T of $TOKENS (default "4096 64").
#   here:   sh bench/rows_ab.sh here build/tools/moec /work/main/build/tools/moec build/rows_ab
#           compiles one bench set per arm into OUTDIR/ARM/
#   device: sh bench/rows_ab.sh device build/rows_ab $OUT/rows_ab
#           builds moert, runs `moert bench --tokens=T --graph --profile`
#           per arm, case and T into OUTDIR/ARM.log, then prints one line per
#           case, T and arm: the block's median us and each step's (kernel
#           names as in `moec inspect`, BUNDLEDIR/ARM/CASE.inspect).
# Arms: new (the default since session 27: the permute as the grid sort,
# k2_count + k2, and the combine with 16-byte loads, the last kN), base
# (--debug=old-rows: the one-CTA permute k2, the body kernel's
# combine), main (MOEC_MAIN's plan, if given).  Compare the steps alone:
# new's k2_count + k2 against base's k2 is the permute, the last kN the
# combine; the block medians say what the graph gains.
set -u
mode=$1
src=$(cd "$(dirname "$0")/.." && pwd)
cases='qwen3_T4096|deepseek_T4096|gptoss_T4096'
arms='new base main'
case $mode in
here)
	a=$2
	if [ $# -ge 4 ]; then main=$3 out=$4; else main= out=$3; fi
	ONLY=$cases sh "$src/bench/make_bench.sh" "$a" "$out/new" >/dev/null || exit 1
	ONLY=$cases MOEC_FLAGS=--debug=old-rows sh "$src/bench/make_bench.sh" "$a" "$out/base" >/dev/null || exit 1
	if [ -n "$main" ]; then
		ONLY=$cases sh "$src/bench/make_bench.sh" "$main" "$out/main" >/dev/null || exit 1
	fi
	for arm in $arms; do
		[ -f "$out/$arm/cases.txt" ] || continue
		echo "ok   $arm: $(awk '{printf "%s ", $1}' "$out/$arm/cases.txt")"
		for b in "$out/$arm"/*.moeb; do	# the kernels of each step, to name the table's columns
			"$a" inspect "$b" >"${b%.moeb}.inspect" 2>&1
		done
	done ;;
device)
	a=$2 out=$3
	mkdir -p "$out" || exit 1
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
	for arm in $arms; do
		[ -f "$a/$arm/cases.txt" ] || continue
		while read -r name bundle _; do
			for t in ${TOKENS:-4096 64}; do
				echo "--- $arm $name@$t"
				d=$tmp/dump.$arm.$name.$t	# the permutation (and DeepSeek-V3's combine) as left
				set -- --dump "moe.offs=$d.offs" --dump "moe.rows=$d.rows"
				case $name in deepseek*) set -- "$@" --dump "t37=$d.t37" ;; esac
				"$tmp/moert" bench "$a/$arm/$bundle" --tokens="$t" --graph --profile "$@" 2>&1
			done
		done <"$a/$arm/cases.txt" >"$out/$arm.log"
	done
	# the same inputs (seed 1) must leave the same bits in every arm
	for f in "$tmp"/dump.base.*; do
		[ -f "$f" ] || continue
		g=$(echo "$f" | sed 's/dump\.base\./dump.new./')
		[ -f "$g" ] || continue
		if cmp -s "$f" "$g"; then echo "same bits  ${f##*/dump.base.}: new = base"
		else echo "DIFFERENT  ${f##*/dump.base.}: new != base"; fi
	done
	# one row per case, T and arm: the block's median, then each step's median
	# (kernel names shortened to kN; which kN is which: ARM/CASE.inspect)
	for arm in $arms; do
		[ -f "$out/$arm.log" ] && cat "$out/$arm.log"
	done | awk '
	/^--- / { arm = $2; name = $3; next }
	/median_us=/ { for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { v = $i; sub(/^median_us=/, "", v); blk[arm, name] = v } next }
	/^  [a-z0-9_]+ +[0-9.]+ +[0-9.]+%$/ {
		k = $1; sub(/^.*_layer[0-9]+_/, "", k); sub(/_norm$/, "+norm", k)
		us[arm, name] = us[arm, name] sprintf(" %s=%s", k, $2)
		seen[arm, name] = 1
	}
	END {
		for (x in seen) { split(x, p, SUBSEP); printf "%-20s %-5s %9.1f %s\n", p[2], p[1], blk[x], us[x] }
	}' | sort
	;;
*)
	echo "usage: rows_ab.sh here MOEC [MOEC_MAIN] OUTDIR | device BUNDLEDIR OUTDIR" >&2
	exit 2 ;;
esac

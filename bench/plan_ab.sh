#!/bin/sh
# plan_ab.sh LABEL=DIR... — on the GPU machine: the same bench cases compiled
# with different launch plans, timed side by side.  Each DIR is a
# bench/make_bench.sh output (cases.txt: "name bundle tokens kind model");
# the cases are the first DIR's.  For every case and skew (SKEWS, default
# "0 80"), ROUNDS (default 2) interleaved rounds of `moert bench --graph`
# (ITERS, default 100) over the DIRs, one line per round:
#
#	ab qwen3_T16 T=16 skew=0 round=1 before=258.624 now=259.100
#
# PROFILE=1 adds, per case and DIR, one `moert bench --graph --profile` (each
# step timed alone) and prints the steps that differ by 3% or more:
#
#	prof deepseek_T4096 deepseek_v3_layer3_k6 before=434.8 now=205.1
#
# moert is built with tests/gpu/build_moert.sh.  Exit 1 if a run failed.
set -u
[ $# -ge 1 ] || { echo "usage: plan_ab.sh LABEL=DIR..." >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sh "$src/tests/gpu/build_moert.sh" "$tmp/moert" || exit 1
first=${1#*=}
rc=0
while read -r name bundle tokens kind _; do
	[ -n "$name" ] || continue
	for skew in ${SKEWS:-0 80}; do
		[ "$kind" = dense ] && [ "$skew" != 0 ] && continue
		r=1
		while [ "$r" -le "${ROUNDS:-2}" ]; do
			line="ab $name T=$tokens skew=$skew round=$r"
			for ld in "$@"; do
				us=$("$tmp/moert" bench "${ld#*=}/$bundle" --tokens="$tokens" --graph \
					--iters="${ITERS:-100}" --warmup=10 --skew="$skew" 2>&1 |
					sed -n 's/^bench .* median_us=\([0-9.]*\) .*/\1/p')
				[ -n "$us" ] || { us=FAILED; rc=1; }
				line="$line ${ld%%=*}=$us"
			done
			echo "$line"
			r=$((r + 1))
		done
	done
done <"$first/cases.txt"
[ "${PROFILE:-0}" = 1 ] || exit $rc
# each DIR's per-step medians (its launches' names, in plan order; a kernel
# named twice, like memset, is numbered), then the steps whose times differ
while read -r name bundle tokens kind _; do
	[ -n "$name" ] || continue
	i=0
	for ld in "$@"; do
		"$tmp/moert" bench "${ld#*=}/$bundle" --tokens="$tokens" --graph --iters="${ITERS:-100}" \
			--warmup=10 --profile 2>&1 |
			awk '/^profile/ {on = 1; next} on && NF == 3 && $1 != "sum" {print $1 "#" (++n[$1]), $2}' \
			>"$tmp/prof.$i" || rc=1
		i=$((i + 1))
	done
	awk -v name="$name" -v labels="$*" '
		BEGIN { n = split(labels, lab, " "); for (j = 1; j <= n; j++) sub(/=.*/, "", lab[j]) }
		{ split(FILENAME, f, "."); j = f[length(f)] + 1; t[$1, j] = $2; if (!seen[$1]++) ord[++m] = $1 }
		END {
			for (k = 1; k <= m; k++) {
				s = ord[k]; lo = hi = t[s, 1]; line = "prof " name " " s
				for (j = 1; j <= n; j++) {
					v = t[s, j]; line = line " " lab[j] "=" v
					if (v < lo) lo = v; if (v > hi) hi = v
				}
				if (hi > 1.03 * lo && hi - lo > 2) print line
			}
		}' $(i=0; for _ in "$@"; do echo "$tmp/prof.$i"; i=$((i + 1)); done)
done <"$first/cases.txt"
exit $rc

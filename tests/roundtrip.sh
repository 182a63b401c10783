#!/bin/sh
# roundtrip.sh SRCDIR MOEC — every .ir file in the tree that parses and
# verifies must print, parse and print again to the same bytes.
# Files meant to be rejected (under diag/, or with a `RUN: not` line) are
# skipped; any other file that fails to parse is a failure.
src=$1 moec=$2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
n=0 skipped=0 bad=0
for f in $(cd "$src" && git ls-files '*.ir' 2>/dev/null || find . -name '*.ir' -not -path './build*'); do
	case "$f" in */diag/*) skipped=$((skipped + 1)); continue ;; esac
	if grep -q 'RUN: *not ' "$src/$f"; then
		skipped=$((skipped + 1))
		continue
	fi
	if ! "$moec" opt "$src/$f" > "$tmp/a.ir" 2>"$tmp/err"; then
		echo "FAIL $f: does not parse and verify"
		cat "$tmp/err"
		bad=$((bad + 1))
		continue
	fi
	"$moec" opt "$tmp/a.ir" > "$tmp/b.ir" 2>"$tmp/err" || { echo "FAIL $f: its own print does not parse"; cat "$tmp/err"; bad=$((bad + 1)); continue; }
	if ! cmp -s "$tmp/a.ir" "$tmp/b.ir"; then
		echo "FAIL $f: print(parse(print(g))) != print(g)"
		diff -u "$tmp/a.ir" "$tmp/b.ir" | head -20
		bad=$((bad + 1))
	fi
	n=$((n + 1))
done
echo "roundtrip: $n files round-trip, $bad differ, $skipped rejected on purpose"
[ $bad -eq 0 ] && [ $n -gt 0 ]

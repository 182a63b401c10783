#!/bin/sh
# layers.sh SRCDIR — the module graph of docs/architecture.md, checked on the
# #include lines of each library directory and of tools/.  The build already
# refuses most wrong arrows (each library's headers are visible only to what
# links it); this names the rule broken, and checks what link lines cannot:
# a directory's private headers (codegen.h, match.h, ...) used from outside
# it, and LLVM headers outside codegen/.
# `layers.sh --selftest` plants a wrong include in a copy and expects a refusal.
# Exit 0 all arrows allowed, 1 one is not.
set -u
if [ "${1:-}" = "--selftest" ]; then
	src=$2
	tmp=$(mktemp -d) || exit 2
	trap 'rm -rf "$tmp"' EXIT
	for d in util ir frontend passes codegen bundle runtime tools; do
		mkdir -p "$tmp/$d" && cp "$src/$d"/*.h "$tmp/$d/" 2>/dev/null
	done
	for bad in 'codegen/x.c passes.h' 'tools/x.c codegen.h' 'ir/x.c bundle.h' 'passes/x.c <llvm-c/Core.h>'; do
		set -- $bad
		case $2 in '<'*) echo "#include $2" > "$tmp/$1" ;; *) echo "#include \"$2\"" > "$tmp/$1" ;; esac
		if sh "$0" "$tmp" >/dev/null 2>&1; then
			echo "FAIL selftest: $1 including $2 was allowed"
			exit 1
		fi
		rm -f "$tmp/$1"
	done
	sh "$0" "$tmp" >/dev/null || { echo "FAIL selftest: the clean copy is refused"; exit 1; }
	echo "layers selftest: 4 wrong arrows refused"
	exit 0
fi
src=$1

# directory: the directories whose headers it may include (its own first)
allowed() {
	case $1 in
	util) echo util ;;
	ir) echo ir util ;;
	frontend) echo frontend ir util ;;
	passes) echo passes ir util ;;
	bundle) echo bundle util ;;
	codegen) echo codegen bundle ir util ;;
	runtime) echo runtime bundle util ;;
	tools) echo tools frontend passes codegen bundle runtime ir util ;;
	esac
}
# headers private to their directory
private="eval_impl.h onnx_int.h cfg.h match.h fuse_moe.h codegen.h k_body.h k_gemm.h internal.h"

bad=0 n=0
for d in util ir frontend passes codegen bundle runtime tools; do
	for f in "$src/$d"/*.c "$src/$d"/*.h; do
		[ -f "$f" ] || continue
		if [ "$d" != codegen ] && grep -q '^#include <llvm' "$f"; then
			echo "FAIL $d/${f##*/}: includes an LLVM header (only codegen/ may)"
			bad=$((bad + 1))
		fi
		for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			n=$((n + 1))
			case $h in *.def|*.inc|onnx.pb-c.h) continue ;; esac
			home=""
			for o in util ir frontend passes codegen bundle runtime tools; do
				[ -f "$src/$o/$h" ] && home=$o
			done
			if [ -z "$home" ]; then
				echo "FAIL $d/${f##*/}: includes $h, which no library directory holds"
				bad=$((bad + 1))
				continue
			fi
			ok=0
			for a in $(allowed "$d"); do
				[ "$a" = "$home" ] && ok=1
			done
			if [ $ok = 0 ]; then
				echo "FAIL $d/${f##*/}: includes $home/$h; $d may include only $(allowed "$d")"
				bad=$((bad + 1))
			elif [ "$home" != "$d" ] && echo " $private " | grep -q " $h "; then
				echo "FAIL $d/${f##*/}: includes $home/$h, private to $home/"
				bad=$((bad + 1))
			fi
		done
	done
done
echo "layers: $n includes, $bad across the module graph's layers"
[ $bad = 0 ]

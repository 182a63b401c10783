#!/bin/sh
# install_check.sh SRCDIR BUILDDIR GPU_RUNTIME_CHECK LIBFAKECUDA —
# `cmake --install` into a temporary prefix must give exactly the runtime's
# library (exporting only moert_*), header and pkg-config file; the example
# must build from them alone (pkg-config moert, -Werror) and run.
src=$1 build=$2 grc=$3 fake=$4
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
(cd "$tmp/prefix" && find . -type f | sort) >"$tmp/files"
libdir=$(dirname "$(cd "$tmp/prefix" && find . -name libmoert.so | head -1)" | sed "s,^\./,,")
printf "%s\n" "./include/moert.h" "./$libdir/libmoert.so" "./$libdir/pkgconfig/moert.pc" | sort >"$tmp/want"
diff "$tmp/want" "$tmp/files" || { echo "FAIL: installed files differ (above)"; exit 1; }
bad=$(nm -D --defined-only "$tmp/prefix/$libdir/libmoert.so" | awk '{print $3}' | grep -v '^moert_')
[ -z "$bad" ] || { echo "FAIL: exports besides moert_*: $bad"; exit 1; }
export PKG_CONFIG_PATH="$tmp/prefix/$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs moert) || exit 1
echo "pkg-config moert: $flags"
${CC:-cc} -std=c17 -Wall -Wextra -Werror -D_GNU_SOURCE "$src/examples/embed.c" $flags -o "$tmp/embed" ||
	exit 1
LD_LIBRARY_PATH="$tmp/prefix/$libdir" "$src/examples/run_embed.sh" "$tmp/embed" "$grc" "$fake"

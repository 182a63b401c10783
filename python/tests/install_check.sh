#!/bin/sh
# install_check.sh SRCDIR BUILDDIR — `pip install ./python` into a fresh
# virtual environment (the package compiles its own libmoert.so with the
# system C compiler), then the package's tests run against that install:
# without a driver, and with the stand-in driver (fakecuda.c).  pip needs
# PyPI for the build's setuptools; with no network the check is skipped (77).
src=$1 build=$2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv" || exit 1
if ! "$tmp/venv/bin/pip" install -q --disable-pip-version-check "$src/python" >"$tmp/log" 2>&1; then
	cat "$tmp/log"
	if grep -qE "No matching distribution|Could not find a version|NewConnectionError|Temporary failure in name resolution" "$tmp/log"; then
		echo "SKIP: no package index reachable"
		exit 77
	fi
	exit 1
fi
lib=$("$tmp/venv/bin/python" -c 'import moert._lib as l; print(l.lib._name)' 2>&1) || { echo "$lib"; exit 1; }
case $lib in
"$tmp"/venv/*) echo "ok   installed: $lib" ;;
*) echo "FAIL: moert loaded $lib, not the installed library"; exit 1 ;;
esac
cd "$src/python/tests" || exit 2
unset MOERT_LIBRARY
MOERT_BUILD=$build MOERT_LIBCUDA=/nonexistent/libcuda.so.1 "$tmp/venv/bin/python" -m unittest test_host || exit 1
MOERT_BUILD=$build MOERT_LIBCUDA=$build/tests/gpu/libfakecuda.so "$tmp/venv/bin/python" -m unittest test_fake || exit 1

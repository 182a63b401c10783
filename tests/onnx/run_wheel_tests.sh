#!/bin/sh
# run_wheel_tests.sh NODETEST SKIPFILE OUTDIR — regenerate the onnx wheel's
# node tests into OUTDIR (once) and run them.  Exit 77 (skip) without onnx.
set -u
here=$(dirname "$0")
if [ ! -f "$3/.generated" ]; then
	rm -rf "$3"
	python3 "$here/gen_node_tests.py" "$3" >/dev/null || exit $?
	touch "$3/.generated"
fi
exec "$1" --skip "$2" "$3"

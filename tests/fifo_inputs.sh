#!/bin/sh
# fifo_inputs.sh SRCDIR BUILDDIR — every command line that reads a file given
# a FIFO, or a symbolic link to one, must refuse it at once with exit 2 and
# "not a regular file (a FIFO)" (issue 18: open() blocked forever).  Each
# command runs under a 10 s timeout, so a reader that blocks fails the test.
src=$1 build=$2
moec=$build/tools/moec moert=$build/tools/moert
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
mkfifo "$tmp/fifo" || exit 2
mkdir "$tmp/hf"
for name in model.onnx g.ir b.moeb t.npy t.pb hf/config.json; do
	ln -s "$tmp/fifo" "$tmp/$name"
done
# expect NAME CMD...: exit 2, the FIFO named in stderr
expect() {
	name=$1
	shift
	timeout 10 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	if [ $rc -ne 2 ] || ! grep -qF "not a regular file (a FIFO)" "$tmp/err"; then
		echo "FAIL $name: exit $rc (want 2), stderr:"
		sed 's/^/     /' "$tmp/err" | head -5
		fail=1
	else
		echo "ok   $name"
	fi
}
expect "moec import model.onnx" "$moec" import "$tmp/model.onnx"
expect "moec import config.json" "$moec" import "$tmp/hf/config.json" --synthetic-weights=1
expect "moec opt g.ir" "$moec" opt "$tmp/g.ir"
expect "moert verify b.moeb" "$moert" verify "$tmp/b.moeb"
printf 'graph @g(%%x: f32[T,8]) -> (y: f32[T,8]) {\n\t%%y = relu %%x : f32[T,8]\n\tret %%y\n}\n' >"$tmp/r.ir"
expect "moec run --input x=t.npy" "$moec" run "$tmp/r.ir" --input x="$tmp/t.npy" -o "$tmp/o"
expect "moec run --input x=t.pb" "$moec" run "$tmp/r.ir" --input x="$tmp/t.pb" -o "$tmp/o"
exit $fail

#!/bin/sh
# moec compile --layers on a 4-layer DeepSeek-V3 (the small fixture's config
# with num_hidden_layers=4: layer 0 dense, 1-3 MoE; synthetic weights):
# - the bundle is format 2 with programs layer.0..layer.3, and is the same
#   bytes when compiled twice;
# - moec inspect and moert verify show the dedupe: layers 2 and 3 add no
#   kernel, the distinct count is what layers 0 and 1 have;
# - each program is what `moec compile --layer=N` writes for that layer
#   alone, up to kernel names: the same manifest, and every kernel the same
#   PTX on every target (whole_model.py).  Single-layer bundles are checked
#   against the interpreter elsewhere (fixture_emulated_*, and moert test on
#   the GPU: docs/gpu.md), so each program computes its layer.
# Usage: whole_model.sh BUILD_DIR
set -eu
build=$1
src=$(cd "$(dirname "$0")/.." && pwd)
moec=$build/tools/moec
moert=$build/tools/moert
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/m"
python3 - "$src/tests/fixtures/hf/deepseek_v3/config.json" "$tmp/m/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = 4
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
flags="--synthetic-weights=7 --arch=sm_90a,sm_80"
"$moec" compile "$tmp/m" $flags --layers=all -o "$tmp/a.moeb" -v 2>"$tmp/err"
grep -q "note: 4 programs, [0-9]* distinct kernels of [0-9]*; codegen ran for 4 modules and reused 4" "$tmp/err" || {
	echo "FAIL: the compile's summary"; cat "$tmp/err"; exit 1; }
"$moec" compile "$tmp/m" $flags --layers=0-3 -o "$tmp/b.moeb" -q
cmp "$tmp/a.moeb" "$tmp/b.moeb" || { echo "FAIL: two compiles differ"; exit 1; }
"$moec" inspect "$tmp/a.moeb" >"$tmp/inspect"
grep -q "^programs: 4$" "$tmp/inspect"
grep -q "^  layer.2 .*(0 new)" "$tmp/inspect" && grep -q "^  layer.3 .*(0 new)" "$tmp/inspect" || {
	echo "FAIL: layers 2 and 3 should add no kernel"; cat "$tmp/inspect"; exit 1; }
"$moert" verify "$tmp/a.moeb" | grep -q "4 programs, [0-9]* distinct kernels" || {
	echo "FAIL: moert verify"; exit 1; }
# a subset is its own bundle, and --program picks one
"$moec" compile "$tmp/m" $flags --layers=1,3 -o "$tmp/c.moeb" -q
"$moec" inspect "$tmp/c.moeb" --program layer.3 | grep -q "^program layer.3:$"
if "$moert" run "$tmp/c.moeb" --input "x=$tmp/none.npy" 2>"$tmp/err"; then exit 1; fi
grep -q "holds 2 programs (layer.1 ... layer.3): name one with --program" "$tmp/err"
for n in 0 1 2 3; do
	"$moec" compile "$tmp/m" $flags --layer=$n -o "$tmp/l$n.moeb" -q
done
python3 "$src/tests/whole_model.py" "$tmp/a.moeb" "$tmp/l0.moeb" "$tmp/l1.moeb" "$tmp/l2.moeb" "$tmp/l3.moeb"
# --cache-dir: the first compile stores, the next reuses (a single-layer
# bundle's kernels carry the layer in their names, so only a recompile of
# the layer finds them; --layers names kernels by the model alone, so every
# layer of the same kernels does), a corrupt or truncated entry is
# recomputed; every bundle is the bytes of the compile without a cache
"$moec" compile "$tmp/m" $flags --layer=1 --cache-dir="$tmp/cache" -o "$tmp/c1.moeb" -v 2>"$tmp/err"
grep -q "codegen cache .*: 0 modules reused, 2 compiled" "$tmp/err" || { echo "FAIL: cache store"; cat "$tmp/err"; exit 1; }
cmp "$tmp/c1.moeb" "$tmp/l1.moeb"
"$moec" compile "$tmp/m" $flags --layer=1 --cache-dir="$tmp/cache" -o "$tmp/c1b.moeb" -v 2>"$tmp/err"
grep -q "codegen cache .*: 2 modules reused, 0 compiled" "$tmp/err" || { echo "FAIL: cache reuse"; cat "$tmp/err"; exit 1; }
cmp "$tmp/c1b.moeb" "$tmp/l1.moeb"
"$moec" compile "$tmp/m" $flags --layers=all --cache-dir="$tmp/cache" -o "$tmp/c.moeb" -v 2>"$tmp/err"
grep -q "codegen ran for 4 modules and reused 4" "$tmp/err" || { echo "FAIL: cache --layers"; cat "$tmp/err"; exit 1; }
cmp "$tmp/c.moeb" "$tmp/a.moeb"
"$moec" compile "$tmp/m" $flags --layers=2-3 --cache-dir="$tmp/cache" -o "$tmp/c23.moeb" -v 2>"$tmp/err"
grep -q "codegen ran for 0 modules and reused 4" "$tmp/err" || { echo "FAIL: cache --layers again"; cat "$tmp/err"; exit 1; }
set -- "$tmp"/cache/*-sm_90a.moecc
python3 - "$@" <<'PY'
import sys
for p in sys.argv[1:]:
    b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 1; open(p, "wb").write(b)
PY
for f in "$tmp"/cache/*-sm_80.moecc; do head -c 100 "$f" >"$f.t" && mv "$f.t" "$f"; done
"$moec" compile "$tmp/m" $flags --layer=1 --cache-dir="$tmp/cache" -o "$tmp/c1c.moeb" -v 2>"$tmp/err"
grep -q "codegen cache .*: 0 modules reused, 2 compiled" "$tmp/err" || { echo "FAIL: corrupt entries"; cat "$tmp/err"; exit 1; }
cmp "$tmp/c1c.moeb" "$tmp/l1.moeb"
"$moec" compile "$tmp/m" $flags --layer=1 --cache-dir="$tmp/cache" -o "$tmp/c1d.moeb" -v 2>"$tmp/err"
grep -q "codegen cache .*: 2 modules reused, 0 compiled" "$tmp/err" || { echo "FAIL: rewritten entries"; exit 1; }
touch "$tmp/file"
if "$moec" compile "$tmp/m" $flags --layer=3 --cache-dir="$tmp/file" -o "$tmp/x.moeb" 2>"$tmp/err"; then exit 1; fi
grep -q "cannot create the folder: a file of that name exists" "$tmp/err"
echo "whole model: ok"

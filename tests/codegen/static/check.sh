#!/bin/sh
# Static shapes and --precision through moec compile (docs/codegen.md):
#  - a model without symbols compiles to a bundle in which no launch reads
#    T (grids are numbers, T arguments literals, the cost a constant), and
#    its GEMMs take the tensor-core builder (bf16 operands with --precision);
#  - --precision=tf32|bf16|f16 puts f32 GEMMs on tensor cores, says so, and
#    records it in the manifest (tf32: the m16n8k8 tf32 mma and cvt.rna in
#    the PTX for sm_80 and sm_90a); unknown values are refused (exit 2).
#	check.sh MOEC MOERT TESTS_CODEGEN_DIR
set -e
moec=$1
moert=$2
src=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for f in mixtral_moe llama_mlp qwen2_moe_dynamo; do
	"$moec" compile "$src/static/$f" -o "$t/$f.moeb" 2>"$t/$f.log" || fail "$f does not compile"
	"$moert" verify "$t/$f.moeb" >/dev/null || fail "$f: moert verify"
	"$moec" inspect "$t/$f.moeb" >"$t/$f.txt"
	grep -q "^  launch " "$t/$f.txt" || fail "$f: no launches"
	if grep "^  launch " "$t/$f.txt" | grep -q "T"; then
		fail "$f: a launch grid depends on T"; fi
	grep -q "^cost: flops=[0-9]* bytes=[0-9]*$" "$t/$f.txt" || fail "$f: the cost depends on T"
	grep -q "runs as a generic kernel" "$t/$f.log" && fail "$f: a GEMM runs as a generic kernel"
	"$moec" compile "$src/static/$f" --precision=bf16 -o "$t/$f.bf16.moeb" 2>"$t/$f.bf16.log" ||
		fail "$f: --precision=bf16 does not compile"
	grep -q "runs on tensor cores: f32 operands rounded to bf16" "$t/$f.bf16.log" ||
		fail "$f: no GEMM on tensor cores with --precision=bf16"
	"$moec" inspect "$t/$f.bf16.moeb" | grep -q "precision bf16" || fail "$f: manifest lacks precision"
done
# the manifest of a static bundle: literal T arguments, no T in any launch
"$moec" compile "$src/static/mixtral_moe" --arch=sm_80 --emit=ptx -o "$t/mx.ptx" --precision=f16 2>/dev/null
grep -q "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "$t/mx.ptx" ||
	fail "--precision=f16: no f16 mma in the PTX"
"$moec" compile "$src/static/mixtral_moe" --arch=sm_80 --emit=ptx -o "$t/mx32.ptx" 2>/dev/null
grep -q "mma.sync" "$t/mx32.ptx" && fail "--precision=f32 (default): an mma in the PTX"
# dynamic models record the precision too; f32 leaves the manifest as it was
"$moec" compile "$src/../fixtures/onnx/mixtral_moe" --precision=f16 -o "$t/dyn.moeb" 2>/dev/null
"$moec" inspect "$t/dyn.moeb" | grep -q "precision f16" || fail "dynamic: manifest lacks precision"
"$moec" compile "$src/../fixtures/onnx/mixtral_moe" -o "$t/dyn32.moeb" 2>/dev/null
"$moec" inspect "$t/dyn32.moeb" | grep -q "precision" && fail "f32: a precision line"
# tf32: the m16n8k8 tf32 mma on both targets, operands through cvt.rna
for arch in sm_80 sm_90a; do
	"$moec" compile "$src/static/mixtral_moe" --arch=$arch --emit=ptx -o "$t/tf.$arch.ptx" \
		--precision=tf32 2>"$t/tf.log" || fail "tf32: $arch does not compile"
	grep -q "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" "$t/tf.$arch.ptx" ||
		fail "--precision=tf32: no tf32 mma in the $arch PTX"
	grep -q "cvt.rna.tf32.f32" "$t/tf.$arch.ptx" || fail "--precision=tf32: no cvt.rna in the $arch PTX"
	grep -q "m16n8k16" "$t/tf.$arch.ptx" && fail "--precision=tf32: a 16-bit mma in the $arch PTX"
done
grep -q "runs on tensor cores: f32 operands rounded to tf32 (--precision=tf32)" "$t/tf.log" ||
	fail "tf32: the note"
"$moec" compile "$src/static/llama_mlp" --precision=tf32 -o "$t/tf.moeb" 2>/dev/null || fail "tf32 bundle"
"$moert" verify "$t/tf.moeb" >/dev/null || fail "tf32: moert verify"
"$moec" inspect "$t/tf.moeb" | grep -q "precision tf32" || fail "tf32: manifest lacks precision"
# refusals
rc=0; "$moec" test --emulate --precision=f8 "$src/static/llama_mlp" >/dev/null 2>"$t/e" || rc=$?
[ $rc = 2 ] && grep -q "precision: .f8. is not one of f32|tf32|bf16|f16" "$t/e" || fail "f8: exit $rc"
echo ok

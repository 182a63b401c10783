#!/bin/sh
# whole_model_gpu.sh MOEC MOERT OUT — whole-model bundles on the GPU, every
# program checked against the interpreter.
#
# Cases: the small Mixtral, Qwen3-MoE and DeepSeek-V3 fixtures (2 layers,
# their checkpoints) and a 4-layer DeepSeek-V3 (the fixture's config with
# num_hidden_layers=4: layer 0 dense, 1-3 MoE; synthetic weights, seed 7).
# Each is compiled once with --layers=all (sm_90a,sm_80); for every layer N
# the interpreter (moec run --layer N) writes the reference outputs of the
# fixture's test_data_set_0 and _1 inputs, and `moert test --program layer.N`
# runs program layer.N of the one bundle on the device against them.
#
# MOEC may be a moec built elsewhere (nothing of it needs a GPU): with
# MOEC=- the bundles and sets already in OUT are used; with MOERT=- they
# are only prepared.  Here, then on the GPU machine:
#	tests/gpu/whole_model_gpu.sh build/tools/moec - .carry/whole
#	tests/gpu/build_moert.sh /tmp/moert && tests/gpu/whole_model_gpu.sh - /tmp/moert .carry/whole
# Exit: 0 every program passed, 1 one failed, 2 a preparation step failed.
set -u
moec=$1 moert=$2 out=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
fix=$src/tests/fixtures/hf
cases="mixtral qwen3_moe deepseek_v3 deepseek_v3_4l"
if [ "$moec" != - ]; then
	mkdir -p "$out/deepseek_v3_4l" || exit 2
	cp "$fix/deepseek_v3/config.json" "$out/deepseek_v3_4l/" || exit 2
	python3 - "$out/deepseek_v3_4l/config.json" <<'PY' || exit 2
import json, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = 4
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
	for c in $cases; do
		case $c in
		deepseek_v3_4l) model=$out/$c; sets=$fix/deepseek_v3; flags=--synthetic-weights=7 ;;
		*) model=$fix/$c; sets=$fix/$c; flags= ;;
		esac
		mkdir -p "$out/$c" || exit 2
		"$moec" compile "$model" $flags --layers=all -o "$out/$c/whole.moeb" -q || exit 2
		n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_hidden_layers'])" \
			"$model/config.json") || exit 2
		for l in $(seq 0 $((n - 1))); do
			mkdir -p "$out/$c/l$l" || exit 2
			for s in 0 1; do
				"$moec" run "$model" $flags --layer "$l" --test-data="$sets/test_data_set_$s" \
					-o "$out/$c/l$l/test_data_set_$s" -q >/dev/null || exit 2
			done
		done
	done
fi
[ "$moert" = - ] && { echo "prepared $out"; exit 0; }
rc=0
for c in $cases; do
	"$moert" verify "$out/$c/whole.moeb" | grep "programs," || rc=1
	for d in "$out/$c"/l*; do
		l=${d##*/l}
		echo "== $c program layer.$l"
		"$moert" test "$out/$c/whole.moeb" --program "layer.$l" "$d" || rc=1
		"$moert" test "$out/$c/whole.moeb" --program "layer.$l" --graph --tile=1,64,1000 "$d" || rc=1
	done
done
[ $rc = 0 ] && echo "whole-model bundles: every program passed" || echo "whole-model bundles: FAILURES"
exit $rc

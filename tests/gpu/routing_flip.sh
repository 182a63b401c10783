#!/bin/sh
# routing_flip.sh MOEC MOERT OUT — moert test telling a routing flip from a
# wrong kernel, on the GPU.  The small Mixtral fixture (8 experts, top-2)
# gets 4096 tokens drawn from N(0,1) in bf16; the interpreter (moec run)
# writes the reference, the bundle runs on the device.  Among 4096 tokens a
# few route at a near tie that the device's rounding decides the other way:
# moert test must report those ("routing: token N: experts {a,b}, expert c
# within G of b: a near tie; rows left out") and pass; every other row is
# compared as before.  MOEC may be a moec built elsewhere (the reference needs
# no GPU): with MOEC=- the bundle and the set already in OUT are used.
# Exit: moert test's (0 passed, 1 failed), 2 a preparation step failed.
set -u
moec=$1 moert=$2 out=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$moec" != - ]; then
	mkdir -p "$out/in" "$out/ref" || exit 2
	python3 "$src/tests/gpu/bf16_input.py" "$out/in" 4096 64 5 || exit 2
	"$moec" run "$src/tests/fixtures/hf/mixtral" --layer 1 --test-data="$out/in" \
		-o "$out/ref/test_data_set_0" >/dev/null || exit 2
	"$moec" compile "$src/tests/fixtures/hf/mixtral" --layer 1 -o "$out/mixtral.moeb" || exit 2
	mkdir -p "$out/bare/test_data_set_0" &&
		cp "$out/ref/test_data_set_0/input_0.pb" "$out/ref/test_data_set_0/output_0.pb" \
			"$out/bare/test_data_set_0/" || exit 2
fi
rc=0
"$moert" test "$out/mixtral.moeb" "$out/ref" --tile=1,7,16,4096 || rc=1
"$moert" test "$out/mixtral.moeb" "$out/bare" --tile=1,7,16,4096 || rc=1
exit $rc

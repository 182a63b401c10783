#!/bin/sh
# ws_gather.sh — the warp-specialised sm_90a GEMM with gathered A rows (the
# MoE gate|up projection: producer warpgroup loads A by cp.async through
# gather_idx, B by TMA; codegen/k_gemm_ws.c) on the H200, in two steps:
#
#   tests/gpu/ws_gather.sh prepare BUILD OUT   here (no GPU): kernels, bundles, reference rows
#   tests/gpu/ws_gather.sh gpu OUT             on the GPU machine (carry OUT)
#
# Until 2026-12-02 these kernels hung on the H200: the producer warpgroup
# took setmaxnreg.dec 48 while the two consumer warpgroups asked for
# setmaxnreg.inc 232, 128 x 48 + 256 x 232 = 65536 registers, but a CTA of
# 384 threads starts with 168 each (64512) and setmaxnreg.inc blocks until
# the CTA's pool holds what it asks for: the second consumer warpgroup waited
# forever.  Now the producer takes 40 (40 + 2 x 232 = 3 x 168), the kernels
# pin .maxnreg 168, and the emulator models the pool (ctest unit_ws).
#
# prepare: bench/gemm kernels (gemm_emit, manifest.json for run_gemm.py):
#   wsup_* and cws_grouped_gather_swiglu (gathered WS, the ones that hung),
#   wup_128x256x64_s4_t (gathered, the cp.async wgmma mainloop: a control)
#   and wsdn_128x256x64_s4_p (WS with TMA for A: worked before; a control);
# full-size MoE layers with synthetic weights (generated on the device) whose
# gate|up GEMM takes gathered WS with two consumer warpgroups (block=384,
# checked here): Mixtral-8x7B, Qwen3-30B-A3B, OLMoE, and Qwen3 again with
# the default (no --debug=ws-gather: the cp.async wgmma mainloop, a control); the interpreter's
# reference rows (tests/gpu/fullsize, uniform and skewed), a minute or two.
#
# gpu: every kernel and bundle under `timeout -k 5 60`, so a hang costs a
# minute, not the device budget; one line each: PASS, FAIL or HANG.  Kernels:
# run_gemm.py's checks (random inputs against torch, T = 4096 uniform and 300
# skewed).  Bundles: moert test --tile=1,65,1000,4096 (T >= 65 runs the
# prefill kernels, the gathered WS one among them) plainly and as a CUDA
# graph.  Then, if every gathered-WS kernel passed, BENCH=1 (the default) times
# the kernels (run_gemm.py --no-check: wsup_* against wup_* against torch's
# grouped GEMM), under `timeout -k 5 240`.
# KERNELS and BUNDLES (environment, at prepare) replace the lists below;
# KERNELS= (empty) checks bundles only.  Grouped clusters sharing B
# (--debug=grouped-c2: both expert GEMMs persistent in clusters of 2, the
# gate|up gathered WS; a hang shows as HANG, wrong multicast halves as FAIL):
#   KERNELS= BUNDLES="qwen3_c2 qwen3-30b-a3b 0 --debug=grouped-c2
#   olmoe_c2 olmoe-1b-7b-0924 0 --debug=grouped-c2" sh tests/gpu/ws_gather.sh prepare BUILD OUT
# Exit: 0 all passed, 1 a check failed or hung, 2 a preparation step failed,
# 77 no GPU.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
cmd=${1:-}
KERNELS=${KERNELS-wsup_,cws_grouped_gather_swiglu,wup_128x256x64_s4_t,wsdn_128x256x64_s4_p}
# case model layer [moec flags]
BUNDLES=${BUNDLES-"mixtral mixtral-8x7b 0 --debug=ws-gather
qwen3_moe qwen3-30b-a3b 0 --debug=ws-gather
olmoe olmoe-1b-7b-0924 0 --debug=ws-gather
qwen3_moe_nows qwen3-30b-a3b 0"}

prepare() {	# BUILD OUT
	build=$1 out=$2
	moec=$build/tools/moec
	mkdir -p "$out/full" || exit 2
	ninja -C "$build" gemm_emit fullsize moec >/dev/null || exit 2
	rm -rf "$out/gemm"
	if [ -n "$KERNELS" ]; then
		"$build/bench/gemm/gemm_emit" -o "$out/gemm" --only "$KERNELS" || exit 2
	fi
	: > "$out/full/list.txt"
	echo "$BUNDLES" | while read -r name model layer flags; do
		# shellcheck disable=SC2086
		"$moec" compile "$src/models/$model" --layer "$layer" --synthetic-weights=1 --max-tokens=4096 \
			$flags -o "$out/full/$name.moeb" || exit 2
		"$moec" inspect "$out/full/$name.moeb" > "$out/full/$name.inspect" || exit 2
		# the gate|up GEMM (k3): gathered WS (ws-gather), two consumer warpgroups, or (the default) not WS
		case $name in
		*_nows) ! grep -q "launch [a-z0-9_]*_k3_ws " "$out/full/$name.inspect" ||
				{ echo "$name: gate|up is WS by default"; exit 2; } ;;
		*) grep -q "launch [a-z0-9_]*_k3_ws .*block=384 " "$out/full/$name.inspect" ||
				{ echo "$name: gate|up is not a 384-thread WS kernel"; exit 2; } ;;
		esac
		rm -rf "$out/full/$name"
		"$build/tests/gpu/fullsize" ref "$src/models/$model" "$layer" "$out/full/$name" 48 || exit 2
		echo "$name" >> "$out/full/list.txt"
	done || exit 2
	echo "prepared $out: $(du -sh "$out" | cut -f1); on the GPU machine: tests/gpu/ws_gather.sh gpu $out"
}

say() {	# say WHAT RC LOG: one line, PASS / FAIL / HANG
	if [ "$2" = 124 ] || [ "$2" = 137 ] || grep -q "^HANG" "$3"; then
		r=HANG
	elif [ "$2" = 0 ]; then
		r=PASS
	else
		r=FAIL
	fi
	printf '%-5s %s (log %s)\n' "$r" "$1" "$3"
	[ $r = PASS ] || { grep -v "^ok" "$3" | tail -6 | sed 's/^/      /'; return 1; }
}

gpu() {	# OUT
	out=$1
	B=${BUILD:-/tmp/ws-gather}
	mkdir -p "$B" || exit 2
	tests/gpu/build_moert.sh "$B/moert" || { echo "FAIL build moert"; exit 1; }
	"$B/moert" info >/dev/null 2>&1 || { echo "SKIP no GPU"; exit 77; }
	"$B/moert" info | head -3
	rc=0 wsbad=0
	echo "== kernels (bench/gemm run_gemm.py checks)"
	[ -f "$out/gemm/manifest.json" ] || wsbad=1	# KERNELS= at prepare: bundles only
	for k in $( [ $wsbad = 1 ] || python3 -c "import json,sys; print(' '.join(c['name'] for c in json.load(open(sys.argv[1]))['cases']))" \
		"$out/gemm/manifest.json"); do
		timeout -k 5 60 python3 bench/gemm/run_gemm.py --dir "$out/gemm" --only "$k" --no-bench \
			--job-timeout 45 > "$B/$k.log" 2>&1
		if ! say "kernel $k" $? "$B/$k.log"; then
			rc=1
			case $k in wsup_*|cws_*) wsbad=1 ;; esac
		fi
	done
	echo "== full-size MoE layers (moert test --tile=1,65,1000,4096; gate|up on gathered WS unless _nows)"
	while read -r name; do
		sets=
		for s in uniform skewed; do [ -d "$out/full/$name/$s" ] && sets="$sets $out/full/$name/$s"; done
		for g in "" --graph; do
			# shellcheck disable=SC2086
			timeout -k 5 60 "$B/moert" test "$out/full/$name.moeb" $sets --tile=1,65,1000,4096 $g \
				> "$B/$name$g.log" 2>&1
			say "bundle $name ${g:-plain}" $? "$B/$name$g.log" || rc=1
		done
	done < "$out/full/list.txt"
	if [ "${BENCH:-1}" = 1 ] && [ $wsbad = 0 ]; then
		echo "== timings (run_gemm.py --no-check: the gathered WS kernels against wup_* and torch)"
		timeout -k 5 240 python3 bench/gemm/run_gemm.py --dir "$out/gemm" --no-check --job-timeout 60 \
			> "$B/bench.log" 2>&1
		say "bench" $? "$B/bench.log" || rc=1
		sed -n '/==== summary ====/,$p' "$B/bench.log"
	fi
	[ $rc = 0 ] && echo "ws_gather: all passed" || echo "ws_gather: FAILED (see above)"
	exit $rc
}

case $cmd in
prepare) [ $# = 3 ] || { echo "usage: $0 prepare BUILD OUT"; exit 2; }; prepare "$2" "$3" ;;
gpu) [ $# = 2 ] || { echo "usage: $0 gpu OUT"; exit 2; }; cd "$src" && gpu "$2" ;;
*) echo "usage: $0 prepare BUILD OUT | gpu OUT"; exit 2 ;;
esac

#!/bin/sh
# tests/fuzz/run.sh SECONDS [TARGET...] — build the libFuzzer targets (clang,
# ASan+UBSan, -DMOEC_FUZZ=ON) in build-fz, seed each corpus from the
# fixtures, and run every target (or those named) for SECONDS, two at a time
# (JOBS=N to change).  Per target, under build-fz/fuzz/<target>/:
#	corpus/    what libFuzzer keeps (grows from run to run)
#	crashes/   crash-*, leak-*, timeout-*, oom-* inputs (copy each one into
#	           tests/fuzz/regress/<target>/ once fixed)
#	log        libFuzzer's output; the last lines are its final stats
# Prints one line per target: executions, coverage, findings.  Exit 1 if
# any target found something.  Targets: onnx ir config safetensors bundle
# tensor.  Bundle seeds are compiled with MOEC (default build/tools/moec,
# built with ./build.sh's configuration if missing).
set -u
secs=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
cd "$src" || exit 2
targets=${*:-onnx ir config safetensors bundle tensor}
jobs=${JOBS:-2}
bz=$src/build-fz
out=$bz/fuzz
cc=${FUZZ_CC:-$(command -v clang-14 || command -v clang)}

echo "run.sh: building the fuzzers with $cc in $bz"
CC=$cc cmake -S . -B "$bz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEC_FUZZ=ON \
	>/dev/null || exit 2
ninja -C "$bz" $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >/dev/null || exit 2

# --- seeds ------------------------------------------------------------------
seed() {	# seed TARGET FILE...: copy into $out/TARGET/seeds under unique names
	d=$out/$1/seeds
	shift
	mkdir -p "$d"
	for f in "$@"; do
		[ -f "$f" ] || continue
		cp "$f" "$d/$(echo "${f#"$src"/}" | tr '/' '_')"
	done
}
bundle_seeds() {
	moec=${MOEC:-$src/build/tools/moec}
	if [ ! -x "$moec" ]; then
		cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
			ninja -C build moec >/dev/null || return
	fi
	b=$bz/bundles
	mkdir -p "$b"
	# small models, one arch: bundles of a few KB, so mutations are cheap
	for d in tests/onnx/cases/*; do
		"$moec" compile "$d" --arch=sm_80 --max-tokens=16 \
			-o "$b/case_$(basename "$d").moeb" 2>/dev/null
	done
	for d in tests/fixtures/hf/gpt2 tests/fixtures/hf/mixtral tests/fixtures/hf/deepseek_v3; do
		"$moec" compile "$d" --layer 1 --synthetic-weights=1 --arch=sm_80 \
			--max-tokens=16 -o "$b/synth_$(basename "$d").moeb" 2>/dev/null
	done
	"$moec" compile tests/fixtures/onnx/gpt2_mlp --max-tokens=64 -o "$b/gpt2_mlp.moeb" 2>/dev/null
	seed bundle "$b"/*.moeb
	# the manifests alone ("moeb 1 ..." text: the manifest mode)
	python3 - "$b" "$out/bundle/seeds" <<'PY'
import glob, os, struct, sys
for f in glob.glob(os.path.join(sys.argv[1], "*.moeb")):
    b = open(f, "rb").read()
    n = struct.unpack_from("<I", b, 12)[0]
    for i in range(n):
        e = 64 + 64 * i
        if b[e:e + 32].rstrip(b"\0") == b"manifest":
            off, size = struct.unpack_from("<QQ", b, e + 32)
            name = os.path.basename(f)[:-5] + ".manifest"
            open(os.path.join(sys.argv[2], name), "wb").write(b[off:off + size])
PY
}
for t in $targets; do
	[ -d "$out/$t/seeds" ] && continue
	case $t in
	onnx) seed onnx tests/fixtures/onnx/*/model.onnx tests/onnx/cases/*/model.onnx \
		tests/onnx/bad/*.onnx /usr/share/libonnx-testdata/data/node/*/model.onnx ;;
	ir) seed ir $(find tests/ir tests/diag -name '*.ir') ;;
	config) seed config models/*/config.json tests/fixtures/hf/*/config.json \
		tests/config/*/*.json tests/config/*/config.json ;;
	safetensors) seed safetensors tests/fixtures/hf/*/*.safetensors ;;
	bundle) bundle_seeds ;;
	tensor) seed tensor $(find tests/fixtures -name '*.pb' | head -100) ;;
	esac
	[ -d tests/fuzz/seeds/$t ] && seed "$t" tests/fuzz/seeds/"$t"/*
	[ -d tests/fuzz/regress/$t ] && seed "$t" tests/fuzz/regress/"$t"/*
done

# --- runs -------------------------------------------------------------------
one() {
	t=$1 d=$out/$1
	mkdir -p "$d/corpus" "$d/crashes" "$d/old"
	# findings of earlier runs are kept aside: crashes/ holds this run's
	for f in "$d"/crashes/*; do [ -e "$f" ] && mv "$f" "$d/old/"; done
	# FUZZ_KEEP_GOING=1: fork mode, going on after a finding (exploring)
	keep=""
	[ -n "${FUZZ_KEEP_GOING:-}" ] &&
		keep="-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
	"$bz/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix="$d/crashes/" $keep \
		"$d/corpus" "$d/seeds" >"$d/log" 2>&1
}
echo "run.sh: $secs s per target, $jobs at a time: $targets"
set -- $targets
while [ $# -gt 0 ]; do
	pids=""
	for _ in $(seq "$jobs"); do
		[ $# -gt 0 ] || break
		one "$1" &
		pids="$pids $!"
		shift
	done
	wait $pids
done

found=0
for t in $targets; do
	d=$out/$t
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$d/log" | tail -1)
	ft=$(grep -o 'ft: [0-9]*' "$d/log" | tail -1)
	corp=$(ls "$d/corpus" | wc -l)
	n=$(ls "$d/crashes" | wc -l)
	[ "$n" -eq 0 ] || found=1
	# no final stats (and not fork mode): the fuzzer did not run; see its log
	[ -n "$execs" ] || [ -n "${FUZZ_KEEP_GOING:-}" ] || { found=1; n="? (no stats: $d/log)"; }
	printf '%-12s %12s execs  %-10s %-10s corpus %-6s findings %s\n' "$t" "${execs:-?}" \
		"${cov:-cov: ?}" "${ft:-ft: ?}" "$corp" "$n"
done
exit $found

#!/bin/sh
# build.sh — set up, build and run moec on a Debian 12 machine.
#
#   ./build.sh          install what is missing, build, run the main job on
#                       the default model (models/, synthetic weights)
#   ./build.sh test     install, build, and run every test (what CI runs)
#
# Packages come from Debian (apt-get); Python packages from PyPI (pip).
set -eu
cd "$(dirname "$0")"
mode=${1:-main}

PKGS="cmake ninja-build pkg-config gcc clang libclang-rt-14-dev python3 python3-pip valgrind rsync
      llvm-19-dev llvm-19-tools libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
      check libcjson-dev libonnx-dev libonnx-testdata"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "build.sh: installing$missing"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
# ONNX's node tests for opsets newer than Debian's 1.12 test data ship in the wheel.
python3 -c "import onnx" 2>/dev/null || python3 -m pip install -q onnx

if ! command -v ptxas >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/ptxas ]; then
	echo "build.sh: note: ptxas (CUDA toolkit) not found; kernels will not be assembled" >&2
fi

# ccache where it is installed: the three builds of `test` again on the same
# machine.  CI's machine is fresh (nothing to reuse), so it is not installed.
launcher=
if command -v ccache >/dev/null 2>&1; then
	launcher=-DCMAKE_C_COMPILER_LAUNCHER=ccache
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEC_WERROR=ON $launcher >/dev/null
ninja -C build

# The whole suite again in build-asan, built with AddressSanitizer, UBSan
# and LeakSanitizer (-DMOEC_SANITIZE=ON); docs/testing.md says which tests
# are left out there and why.
sanitized() {
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DMOEC_SANITIZE=ON $launcher >/dev/null
	ninja -C build-asan
	# LeakSanitizer stops the process's threads with ptrace-like calls, which
	# some containers refuse: probe it, and say so if leaks go unchecked.
	leaks=1
	printf '#include <stdlib.h>\nvoid *p;\nint main(void){p=malloc(7);p=0;return 0;}\n' \
		>build-asan/lsan_probe.c
	if ! cc -fsanitize=address -o build-asan/lsan_probe build-asan/lsan_probe.c 2>/dev/null ||
	   ! ASAN_OPTIONS=detect_leaks=1 build-asan/lsan_probe 2>&1 |
		grep -q "LeakSanitizer: detected memory leaks"; then
		echo "build.sh: note: LeakSanitizer does not work here; leaks are not checked" >&2
		leaks=0
	fi
	ASAN_OPTIONS="detect_leaks=$leaks:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1" \
	LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
	UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/ubsan.supp" \
	CK_TIMEOUT_MULTIPLIER=4 \
		ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -E "$ASAN_SKIP"
}
# Left out of the sanitized run (docs/testing.md): `bundles` compiles every
# fixture twice through ptxas to check that bundles are reproducible, 3+
# minutes under ASan; the same compiler paths run sanitized in the fixture_*
# tests, and bundle writing in runtime_faults and unit_program.
ASAN_SKIP='^bundles$'

case "$mode" in
main)
	# The default model: Mixtral-8x7B's layer-0 MoE block from its config
	# (weights generated on the device), compiled for sm_90a and sm_80 with
	# the fusion report, then the bundle's table of contents and launch plan.
	build/tools/moec compile models/mixtral-8x7b/config.json --layer 0 \
		--synthetic-weights=1 --fusion-report -o build/mixtral-8x7b.moeb
	build/tools/moec inspect build/mixtral-8x7b.moeb
	;;
test)
	ctest --test-dir build --output-on-failure -j"$(nproc)"
	sanitized
	# The code is warning-free under clang too (-Wall -Wextra -Werror):
	# compiled, not tested again.
	CC=clang cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug \
		-DMOEC_WERROR=ON $launcher >/dev/null
	ninja -C build-clang
	;;
*)
	echo "usage: ./build.sh [main|test]" >&2
	exit 2
	;;
esac

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

PKGS="cmake ninja-build pkg-config gcc clang python3 python3-pip valgrind rsync
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

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEC_WERROR=ON >/dev/null
ninja -C build

case "$mode" in
main)
	build/tools/moec import models/mixtral-8x7b/config.json --layer 0 \
		--synthetic-weights=1 --summary
	;;
test)
	ctest --test-dir build --output-on-failure -j"$(nproc)"
	;;
*)
	echo "usage: ./build.sh [main|test]" >&2
	exit 2
	;;
esac

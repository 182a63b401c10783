#!/bin/sh
# ep_nccl.sh [RANKS] [BUILDDIR] — expert parallelism's NCCL path on this
# machine's GPUs (issue 20, for the lead: nvidia-h200 with RANKS=1,
# nvidia-h200-x2/x4/x8 with 2/4/8).  Builds tests/gpu/nccl_check with plain
# gcc (no CMake, no CUDA toolkit: libcuda and libnccl are dlopen'd), finds
# libnccl.so.2, checks all_to_all and all_gather byte for byte over RANKS
# ranks (one thread per GPU), then times the all_to_all at the padded
# dispatch and combine sizes of DeepSeek-V3 and Qwen3-235B-A22B layers at
# T = 16, 256, 4096 tokens per rank against one large all_to_all measured in
# the same run, and prints the table (with the synthetic routing's load
# imbalance).  RANKS defaults to every GPU nvidia-smi lists.
#
# Where libnccl.so.2 comes from, first found wins: $MOERT_LIBNCCL; the
# nvidia-nccl-cu12/cu13 wheel that torch installs (python3 -c 'import
# nvidia.nccl': a namespace package, its lib/ holds libnccl.so.2); a glob of
# site-packages; the system's (ldconfig -p, /usr/local/cuda*/lib*).
# Exit 0 pass, 1 fail, 77 no GPU, driver or NCCL.
set -u
cd "$(dirname "$0")/../.." || exit 1
N=${1:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
B=${2:-/tmp/moert-ep}
[ "${N:-0}" -ge 1 ] 2>/dev/null || { echo "SKIP no GPU"; exit 77; }
CC=${CC:-gcc}
command -v "$CC" >/dev/null 2>&1 || CC=cc
mkdir -p "$B" || exit 1

. tests/gpu/find_nccl.sh
use_nccl
echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset (the runtime sets 0)}"

# shellcheck disable=SC2086
$CC -std=c17 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iutil -Ibundle -Iruntime \
	-o "$B/nccl_check" tests/gpu/nccl_check.c util/*.c bundle/*.c runtime/*.c -ldl -lpthread -lm ||
	{ echo "FAIL build"; exit 1; }
# a rank that fails leaves the others waiting in NCCL: bounded
timeout 300 "$B/nccl_check" --ranks "$N" --bench
rc=$?
[ $rc = 124 ] && echo "FAIL timed out"
exit $rc

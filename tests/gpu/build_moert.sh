#!/bin/sh
# build_moert.sh OUT — the moert CLI built with plain gcc (no CMake, no CUDA
# toolkit) from the sources it needs, for the scripts that run on a GPU
# machine.  The one place that lists those sources.  Exit 1 if it fails.
set -u
cd "$(dirname "$0")/../.." || exit 1
CC=${CC:-gcc}
command -v "$CC" >/dev/null 2>&1 || CC=cc
mkdir -p "$(dirname "$1")" || exit 1
# shellcheck disable=SC2086
$CC -std=c17 -O2 -g -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iutil -Ibundle -Iruntime -Itools \
	-o "$1" tools/moert.c tools/opt.c util/*.c bundle/*.c runtime/*.c -ldl -lpthread -lm

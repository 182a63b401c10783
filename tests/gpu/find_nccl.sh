# find_nccl.sh — sourced by the GPU scripts (ep_nccl.sh, ep_bundle.sh):
# find_nccl prints the libnccl.so.2 to use, first found wins: $MOERT_LIBNCCL;
# the nvidia-nccl-cu12/cu13 wheel that torch installs (python3 -c 'import
# nvidia.nccl': a namespace package, its lib/ holds libnccl.so.2); a glob of
# site-packages; the system's (ldconfig -p, /usr/local/cuda*/lib*).
find_nccl() {
	if [ -n "${MOERT_LIBNCCL:-}" ]; then echo "$MOERT_LIBNCCL"; return; fi
	for py in python3 python /usr/bin/python3; do
		d=$($py -c 'import nvidia.nccl as m, os; print(list(m.__path__)[0])' 2>/dev/null) &&
			[ -f "$d/lib/libnccl.so.2" ] && { echo "$d/lib/libnccl.so.2"; return; }
	done
	for f in /usr/local/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2 \
		 /usr/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2 \
		 "$HOME"/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
		 /opt/*/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
	f=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
	[ -n "$f" ] && { echo "$f"; return; }
	for f in /usr/local/cuda*/lib*/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
}

# use_nccl: export MOERT_LIBNCCL as find_nccl finds it and say which, or
# exit 77 (skipped) when there is none.
use_nccl() {
	MOERT_LIBNCCL=$(find_nccl)
	[ -n "$MOERT_LIBNCCL" ] || { echo "SKIP no libnccl.so.2 found (set MOERT_LIBNCCL)"; exit 77; }
	export MOERT_LIBNCCL
	echo "libnccl: $MOERT_LIBNCCL"
}

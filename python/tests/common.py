"""Shared by the package's tests: where the build is, bundles made once.

MOERT_BUILD names the CMake build folder (default: build/ of this checkout);
the tests compile their bundles with its moec and gpu_runtime_check.  They
need no torch and no GPU: test_host runs with no driver, test_fake with the
stand-in driver tests/gpu/fakecuda.c (MOERT_LIBCUDA=.../libfakecuda.so).
"""
import atexit
import os
import shutil
import struct
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MOERT_BUILD") or os.path.join(ROOT, "build")
TMP = tempfile.mkdtemp(prefix="moert-py-")
atexit.register(shutil.rmtree, TMP, True)
_made = {}


def mixtral_bundle():
    """The small Mixtral fixture's layer-0 FFN, synthetic weights, sm_80."""
    if "mixtral" not in _made:
        out = os.path.join(TMP, "mixtral.moeb")
        subprocess.run([os.path.join(BUILD, "tools", "moec"), "compile",
                        os.path.join(ROOT, "tests", "fixtures", "hf", "mixtral", "config.json"),
                        "--layer", "0", "--synthetic-weights=1", "--arch=sm_80", "-o", out],
                       check=True, capture_output=True)
        _made["mixtral"] = out
    return _made["mixtral"]


def arctic_bundle():
    """The small Arctic fixture's layer 1: a MoE block with two inputs, x and
    layer_in (docs/config.md), synthetic weights, sm_80."""
    if "arctic" not in _made:
        out = os.path.join(TMP, "arctic.moeb")
        subprocess.run([os.path.join(BUILD, "tools", "moec"), "compile",
                        os.path.join(ROOT, "tests", "fixtures", "hf", "arctic"),
                        "--layer", "1", "--synthetic-weights=1", "--arch=sm_80", "-o", out],
                       check=True, capture_output=True)
        _made["arctic"] = out
    return _made["arctic"]


def whole_bundle():
    """The small DeepSeek-V3 fixture compiled whole: layer 0 dense, layer 1
    MoE, programs layer.0 and layer.1, synthetic weights, sm_80."""
    if "whole" not in _made:
        out = os.path.join(TMP, "whole.moeb")
        subprocess.run([os.path.join(BUILD, "tools", "moec"), "compile",
                        os.path.join(ROOT, "tests", "fixtures", "hf", "deepseek_v3"),
                        "--layers=all", "--synthetic-weights=1", "--arch=sm_80", "-o", out],
                       check=True, capture_output=True)
        _made["whole"] = out
    return _made["whole"]


def check_bundle():
    """gpu_runtime_check's bundle, whose kernels fakecuda.c runs as C:
    x f32[T,96] -> y = x*w + 1 (w synthetic, f32[96]), n i32[T] = sum of the
    real weight inc = {1,2,3,4} over j%4 for j < 96 (that is 240 per row)."""
    if "check" not in _made:
        # it writes the bundle, then runs the GPU check: 77 without a GPU
        r = subprocess.run([os.path.join(BUILD, "tests", "gpu", "gpu_runtime_check"), "--emit",
                            TMP], capture_output=True, text=True)
        _made["check"] = os.path.join(TMP, "check.moeb")
        if r.returncode not in (0, 77) or not os.path.exists(_made["check"]):
            raise RuntimeError("gpu_runtime_check --emit: %s" % r.stdout + r.stderr)
    return _made["check"]


def programs_bundle():
    """check_bundle() as three programs layer.0..2 sharing its code, program
    i's inc = {1,2,3,4} + i (serve_check --write-programs, no driver)."""
    if "programs" not in _made:
        out = os.path.join(TMP, "programs.moeb")
        subprocess.run([os.path.join(BUILD, "tests", "gpu", "serve_check"), check_bundle(),
                        "--write-programs", out], check=True, capture_output=True)
        _made["programs"] = out
    return _made["programs"]


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def synth_w(seed=1234, n=96):
    """The init kernel synth_w of gpu_runtime_check, in Python."""
    out = []
    for j in range(n):
        x = (j * 0x9E3779B1 + seed) & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        x ^= x >> 16
        out.append(f32((x >> 8) * 2.0 ** -24 - 0.5))
    return out


def axpb(x, w):
    """y = x*w + 1 in f32, as the kernel computes it (x row-major [T,96])."""
    return [f32(f32(v * w[i % len(w)]) + 1.0) for i, v in enumerate(x)]


def pack_f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def unpack(fmt, data):
    n = len(data) // struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (n, fmt), data))

"""Build hook: compile libmoert.so from the repository's C sources (util/,
bundle/, runtime/ — libc and dlopen only) with the system C compiler and
ship it inside the package.  No CUDA toolkit is needed: the library opens
libcuda.so.1 itself at run time.  The sources are found at $MOERT_SRC or in
the checkout this folder belongs to (pip install ./python builds in place).
"""
import glob
import os
import shlex
import shutil
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def sources():
    root = os.environ.get("MOERT_SRC") or os.path.dirname(HERE)
    if not os.path.isfile(os.path.join(root, "runtime", "moert.h")):
        raise SystemExit("moert: the C sources are not at %s (set MOERT_SRC to the moec "
                         "checkout)" % root)
    files = []
    for d in ("util", "bundle", "runtime"):
        files += sorted(glob.glob(os.path.join(root, d, "*.c")))
    return root, files


class BuildLib(build_py):
    def run(self):
        super().run()
        root, files = sources()
        out = os.path.join(self.build_lib, "moert", "libmoert.so")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        if not shutil.which(cc[0]):
            cc = ["cc"]     # Python's own build compiler may not be on this machine
        cmd = cc + ["-std=gnu17", "-O2", "-g", "-fPIC", "-shared", "-D_GNU_SOURCE",
                    "-fvisibility=default"]
        cmd += ["-I" + os.path.join(root, d) for d in ("util", "bundle", "runtime")]
        cmd += ["-Wl,--version-script=" + os.path.join(root, "runtime", "moert.map"),
                "-o", out] + files + ["-ldl", "-lpthread", "-lm"]
        print(" ".join(cmd))
        subprocess.check_call(cmd)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True     # the wheel holds a native library: tag it for this platform


setup(cmdclass={"build_py": BuildLib}, distclass=BinaryDistribution)

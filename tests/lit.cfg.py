# lit configuration: FileCheck tests of IR text, passes and diagnostics.
# Paths come from lit.site.cfg.py, which CMake writes into the build tree.
import os
import lit.formats

config.name = "moec"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".ir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moec_obj_root, "tests")
# fixtures, unit tests and data folders hold .ir inputs, not tests
config.excludes = ["fixtures", "fuzz", "unit", "Inputs", "onnx", "config", "gpu", "codegen-data"]
config.environment["PATH"] = os.pathsep.join(
    [config.moec_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["MOEC_CHECK_ROUNDTRIP"] = "1"
config.substitutions.append(("%moert", os.path.join(config.moec_tools_dir, "moert")))
config.substitutions.append(("%moec", os.path.join(config.moec_tools_dir, "moec")))
config.substitutions.append(("%srcroot", config.moec_src_root))

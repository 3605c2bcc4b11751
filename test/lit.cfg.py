# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Strata"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext"]
config.excludes = ["Inputs", "CMakeLists.txt", "models", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.strata_obj_root, "test")

# Captured FileCheck variables do not leak between CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# No profile strata-calibrate remembered on this machine (~/.config/strata)
# changes what the tests compile.
config.environment["STRATA_PROFILE"] = ""

# What only the planner's GLPK programmes compute is checked where the
# compiler has them (scripts/asan-tests.sh builds it without).
if getattr(config, "strata_have_glpk", False):
    config.available_features.add("glpk")

llvm_config.use_default_substitutions()
config.substitutions.append(("%python", config.test_python))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.strata_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["strata-opt", "strata-compile"], [config.strata_tools_dir])

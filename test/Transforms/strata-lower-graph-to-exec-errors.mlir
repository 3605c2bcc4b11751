// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-lower-graph-to-exec

// Every error --strata-lower-graph-to-exec reports beyond the ones of
// strata-lower-graph-to-exec.mlir.

// Tests a function of several blocks.
// expected-error @below {{expected a function with one block}}
func.func @main() {
  return
^bb1:
  return
}

// -----

// Tests an op the runtime has no kernel for.
func.func @callee(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @below {{no exec lowering for func.call}}
  %y = func.call @callee(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

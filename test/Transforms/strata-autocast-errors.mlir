// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-autocast=precision=bf16

// Every error --strata-autocast reports beyond its option (the unknown
// precision: strata-autocast.mlir).

// Tests that the pass needs a @main.
// expected-error @below {{no @main function}}
module {
  func.func @other() {
    return
  }
}

// -----

// Tests a half-precision parameter whose values cannot be read to make its
// fp32 master (a resource the file does not hold).
func.func @main(%x: tensor<3xf16>) -> tensor<3xf16> {
  // expected-error @below {{cannot read the half-precision values of 'w' to make its fp32 master}}
  %w = graph.param "w" trainable {initial_value = dense_resource<absent> : tensor<3xf16>} : tensor<3xf16>
  %y = graph.mul %w, %x : (tensor<3xf16>, tensor<3xf16>) -> tensor<3xf16>
  return %y : tensor<3xf16>
}

// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-autodiff

// Every error --strata-autodiff reports for a program it cannot
// differentiate, besides the frozen-loss one (strata-autodiff.mlir). Two
// are internal invariants, checked but not reachable from valid IR: an op
// the forward pass marks differentiable (Graph_Differentiable) always has a
// gradient rule, and a rule returns one gradient per operand.

// Tests that the pass needs a @main.
// expected-error @below {{no @main function}}
module {
  func.func @other() {
    return
  }
}

// -----

// Tests a function without a loss.
// expected-error @below {{autodiff needs the loss as the first result}}
func.func @main(%x: tensor<3xf32>) {
  return
}

// -----

// Tests a loss that is not a float scalar.
// expected-error @below {{the loss must be a float scalar, it is 'tensor<3xf32>'}}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}

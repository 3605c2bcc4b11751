// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-attach-optimizer
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer=optimizer=rmsprop 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer=accumulate=0 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer=clip-mode=sometimes 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer=loss-scale=-3 2>&1 | FileCheck %s --check-prefix=SCALE
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer="optimizer=adalomo clip-grad-norm=1.0" 2>&1 | FileCheck %s --check-prefix=ADALOMO
// RUN: not strata-opt %s --split-input-file --strata-attach-optimizer=loss-scale=dynamic 2>&1 | FileCheck %s --check-prefix=SEED

// Every error --strata-attach-optimizer reports. The option errors are
// checked once each (the first split has no @main, so they come from the
// later ones).
// OPT: error: unknown optimizer 'rmsprop' (expected sgd, momentum, adamw, lomo or adalomo)
// ACC: error: accumulate must be at least 1
// CLIP: error: unknown clip mode 'sometimes' (exact, two-pass or previous-step)
// SCALE: error: --loss-scale must be none, dynamic or a positive number, not '-3'
// ADALOMO: error: adalomo supports neither clipping nor accumulation yet
// SEED: error: loss scaling needs the autodiff seed

// Tests that the pass needs a @main.
// expected-error @below {{no @main function}}
module {
  func.func @other() {
    return
  }
}

// -----

// Tests a result after the loss that is not a gradient.
// expected-error @below {{result 1 is not a gradient}}
func.func @main(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

// -----

// Tests a gradient of a parameter the function does not have.
// expected-error @below {{gradient of unknown parameter "v"}}
func.func @main(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32> {graph.grad_of = "v"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

// -----

// Tests a loss without gradients (autodiff did not run).
// expected-error @below {{no gradients to apply (run --strata-autodiff)}}
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests gradients ready for an update (where the option errors show).
func.func @main(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32> {graph.grad_of = "w"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

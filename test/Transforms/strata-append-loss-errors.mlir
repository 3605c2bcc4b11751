// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-append-loss
// RUN: not strata-opt %s --split-input-file --strata-append-loss=loss=output 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not strata-opt %s --split-input-file --strata-append-loss=loss=mse 2>&1 | FileCheck %s --check-prefix=KIND

// Every error --strata-append-loss reports, with the default causal-lm
// loss; the OUTPUT and KIND runs check the ones of other options.
// KIND: error: unknown loss 'mse' (expected causal-lm or output)
// OUTPUT: error: no @main function
// OUTPUT: error: --loss output: the model has no output
// OUTPUT: error: --loss output: the model's first output must be a float scalar, it is 'tensor<2x3xf32>'

// Tests that the pass needs a @main.
// expected-error @below {{no @main function}}
module {
  func.func @other() {
    return
  }
}

// -----

// Tests a model without outputs.
// expected-error @below {{--loss causal-lm: the model has no output}}
func.func @main(%ids: tensor<2x3xi64>) {
  return
}

// -----

// Tests a first output that is not [B, T, V] logits of [B, T] token ids.
// expected-error @below {{--loss causal-lm needs a model mapping token ids [B, T] to logits [B, T, V]; its first output is 'tensor<2x3xf32>' (use --loss output for a model that returns its own scalar loss)}}
func.func @main(%ids: tensor<2x3xi64>, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}

// -----

// Tests token ids and logits that disagree on [B, T].
// expected-error @below {{--loss causal-lm: token ids 'tensor<2x3xi64>' and logits 'tensor<2x4x5xf32>' disagree on [B, T]}}
func.func @main(%ids: tensor<2x3xi64>, %x: tensor<2x4x5xf32>) -> tensor<2x4x5xf32> {
  return %x : tensor<2x4x5xf32>
}


// RUN: strata-opt %s --split-input-file --verify-diagnostics

// Tests that updates apply to float parameters.
func.func @int_param(%w: tensor<4xi32>, %g: tensor<4xi32>) {
  // expected-error @+1 {{updates float parameters only}}
  train.update_sgd %w, %g {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xi32>
  return
}

// -----

// Tests that the clipping scale is a scalar.
func.func @scale_rank(%w: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{scale must be a scalar}}
  train.update_sgd %w, %g scale %s : tensor<2xf32> {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

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

// -----

// Tests that a shard is ceil(numel / ranks) elements of the input's type.
func.func @shard_size(%g: tensor<5xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{a shard of 'tensor<5xf32>' over 2 ranks is 'tensor<3xf32>', not 'tensor<2xf32>'}}
  %s = train.reduce_scatter %g {ranks = 2 : i64} : tensor<5xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// Tests that a shard keeps the element type.
func.func @shard_type(%w: tensor<2x3xf32>) -> tensor<3xf16> {
  // expected-error @+1 {{is 'tensor<3xf32>', not 'tensor<3xf16>'}}
  %s = train.shard %w {ranks = 2 : i64} : tensor<2x3xf32> -> tensor<3xf16>
  return %s : tensor<3xf16>
}

// -----

// Tests that a gathered shard matches its target.
func.func @gather_ranks(%w: tensor<8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{needs at least one rank, not 0}}
  train.all_gather %w, %s {ranks = 0 : i64} : tensor<8xf32>, tensor<2xf32>
  return
}

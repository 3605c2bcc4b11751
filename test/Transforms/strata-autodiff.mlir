// RUN: strata-opt %s --split-input-file --strata-autodiff --canonicalize --verify-diagnostics | FileCheck %s

// Tests that a parameter used twice (tied) sums both contributions, that a
// frozen parameter gets no gradient, and that gradients become results
// marked with the parameter they belong to.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.+]]: tensor<3xf32>) -> (tensor<f32> {graph.name = "loss"}, tensor<3xf32> {graph.grad_of = "w"})
// CHECK-DAG: %[[ONE:.+]] = graph.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[F:.+]] = graph.param "frozen"
// CHECK: %[[LOSS:.+]] = graph.reduce_sum
// CHECK-DAG: %[[DB:.+]] = graph.mul %[[F]], %[[ONE]]
// CHECK-DAG: %[[DA:.+]] = graph.mul %[[X]], %[[ONE]]
// CHECK: %[[SUM:.+]] = graph.add %[[DB]], %[[DA]]
// CHECK-NEXT: return %[[LOSS]], %[[SUM]]
func.func @main(%x: tensor<3xf32>) -> (tensor<f32> {graph.name = "loss"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %f = graph.param "frozen" {initial_value = dense<2.0> : tensor<3xf32>} : tensor<3xf32>
  %a = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = graph.mul %w, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = graph.add %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss which no trainable parameter reaches is an error.
// expected-error @+1 {{the loss does not depend on any trainable parameter}}
func.func @main(%x: tensor<3xf32>) -> (tensor<f32> {graph.name = "loss"}) {
  %f = graph.param "frozen" {initial_value = dense<2.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %x, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: strata-opt %s --split-input-file --strata-lower-graph-to-exec --verify-diagnostics | FileCheck %s --implicit-check-not=graph.

// Tests that arguments become inputs, parameters and constants stored
// values, reshapes views, computations kernels with their attributes in
// ints/floats, and results outputs; the function loses its signature.
// CHECK-LABEL: func.func @main()
// CHECK: %[[X:.+]] = exec.input "x" : tensor<2x4xf32>
// CHECK: %[[W:.+]] = exec.param "w" trainable {value = dense<5.000000e-01> : tensor<4x4xf32>} : tensor<4x4xf32>
// CHECK: %[[G:.+]] = exec.param "g" {value = dense<1.000000e+00> : tensor<4xf32>} : tensor<4xf32>
// CHECK: %[[C:.+]] = exec.param "const.0" constant {value = dense<2.000000e+00> : tensor<f32>} : tensor<f32>
// CHECK: %[[M:.+]] = exec.kernel "matmul"(%[[X]], %[[W]]) {ints = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[P:.+]] = exec.kernel "pow"(%[[M]], %[[C]])
// CHECK: %[[L:.+]] = exec.kernel "layer_norm"(%[[P]], %[[G]]) {floats = array<f64: 9.9999997473787516E-6>, ints = array<i64: 1, 0, 0>} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: %[[R:.+]] = exec.kernel "reduce_mean"(%[[L]]) {ints = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK: %[[T:.+]] = exec.kernel "transpose"(%[[L]]) {ints = array<i64: 1, 0>}
// CHECK: %[[S:.+]] = exec.kernel "slice"(%[[T]]) {ints = array<i64: 3, 0, -1, 1>}
// CHECK: %[[GE:.+]] = exec.kernel "gelu"(%[[S]]) {ints = array<i64: 1>}
// CHECK: %[[V:.+]] = exec.view %[[GE]] : tensor<2x2xf32> -> tensor<4xf32>
// CHECK: exec.output "y" %[[V]] : tensor<4xf32>
// CHECK: exec.output "mean" %[[R]] : tensor<2x1xf32>
// CHECK: return
func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<4xf32> {graph.name = "y"}, tensor<2x1xf32> {graph.name = "mean"}) {
  %w = graph.param "w" trainable {initial_value = dense<0.5> : tensor<4x4xf32>} : tensor<4x4xf32>
  %g = graph.param "g" {initial_value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %m = graph.matmul %x, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %p = graph.pow %m, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %l = graph.layer_norm %p, %g axis = 1 epsilon = 1.0e-05 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = graph.reduce_mean %l axes = [1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %t = graph.transpose %l perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %s = graph.slice %t offsets = [3, 0] strides = [-1, 1] : tensor<4x2xf32> -> tensor<2x2xf32>
  %ge = graph.gelu %s tanh : tensor<2x2xf32>
  %y = graph.reshape %ge : tensor<2x2xf32> -> tensor<4xf32>
  return %y, %r : tensor<4xf32>, tensor<2x1xf32>
}

// -----

// Tests that a parameter without a value cannot be stored.
func.func @main() -> tensor<4xf32> {
  // expected-error @+1 {{parameter 'w' has no initial value to store}}
  %w = graph.param "w" trainable : tensor<4xf32>
  return %w : tensor<4xf32>
}

// RUN: strata-opt %s | strata-opt | FileCheck %s
// RUN: strata-opt %s --mlir-print-op-generic | strata-opt | FileCheck %s

// Tests that every graph op round-trips through its custom assembly format.

// CHECK-LABEL: func.func @values
func.func @values() -> (tensor<2xi64>, tensor<4x8xf32>, tensor<8xf32>) {
  // CHECK: graph.constant dense<[2, 3]> : tensor<2xi64>
  %c = graph.constant dense<[2, 3]> : tensor<2xi64>
  // CHECK: graph.param "fc.weight" trainable : tensor<4x8xf32>
  %w = graph.param "fc.weight" trainable : tensor<4x8xf32>
  // CHECK: graph.param "fc.bias" {initial_value = dense<1.000000e+00> : tensor<8xf32>} : tensor<8xf32>
  %b = graph.param "fc.bias" {initial_value = dense<1.0> : tensor<8xf32>} : tensor<8xf32>
  return %c, %w, %b : tensor<2xi64>, tensor<4x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %m: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.sub
  %1 = graph.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.mul
  %2 = graph.mul %1, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.div
  %3 = graph.div %2, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.pow
  %4 = graph.pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.max
  %5 = graph.max %4, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.min
  %6 = graph.min %5, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.equal %{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %e = graph.equal %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.less
  %l = graph.less %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.greater
  %g = graph.greater %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: graph.and
  %and = graph.and %e, %l : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: graph.or
  %or = graph.or %and, %g : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: graph.not %{{.*}} : tensor<2x3xi1>
  %not = graph.not %or : tensor<2x3xi1>
  // CHECK: graph.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = graph.select %not, %6, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.neg
  %u0 = graph.neg %s : tensor<2x3xf32>
  // CHECK: graph.exp
  %u1 = graph.exp %u0 : tensor<2x3xf32>
  // CHECK: graph.log
  %u2 = graph.log %u1 : tensor<2x3xf32>
  // CHECK: graph.sqrt
  %u3 = graph.sqrt %u2 : tensor<2x3xf32>
  // CHECK: graph.reciprocal
  %u4 = graph.reciprocal %u3 : tensor<2x3xf32>
  // CHECK: graph.tanh
  %u5 = graph.tanh %u4 : tensor<2x3xf32>
  // CHECK: graph.erf
  %u6 = graph.erf %u5 : tensor<2x3xf32>
  // CHECK: graph.sigmoid
  %u7 = graph.sigmoid %u6 : tensor<2x3xf32>
  // CHECK: graph.relu
  %u8 = graph.relu %u7 : tensor<2x3xf32>
  // CHECK: graph.gelu %{{.*}} : tensor<2x3xf32>
  %u9 = graph.gelu %u8 : tensor<2x3xf32>
  // CHECK: graph.gelu %{{.*}} tanh : tensor<2x3xf32>
  %u10 = graph.gelu %u9 tanh : tensor<2x3xf32>
  return %u10 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @rows
func.func @rows(%m: tensor<8xi1>, %x: tensor<8x4xf32>, %w: tensor<4x3xf32>) -> tensor<8x3xf32> {
  // CHECK: %{{.*}}, %[[N:.*]] = graph.compact_rows %{{.*}} {expected = 2 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %o, %n = graph.compact_rows %m {expected = 2 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  // CHECK: graph.matmul %{{.*}}, %{{.*}} rows %[[N]] : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %y = graph.matmul %x, %w rows %n : (tensor<8x4xf32>, tensor<4x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} rows %[[N]] {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>, tensor<i64>) -> tensor<4x3xf32>
  %g = graph.matmul %x, %y rows %n {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>, tensor<i64>) -> tensor<4x3xf32>
  return %y : tensor<8x3xf32>
}

// CHECK-LABEL: func.func @structural
func.func @structural(%x: tensor<2x16x64xf32>, %w: tensor<64x256xf32>, %g: tensor<64xf32>, %ids: tensor<2x16xi64>, %table: tensor<256x64xf32>) -> tensor<2x16x64xf32> {
  // CHECK: graph.matmul %{{.*}}, %{{.*}} : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %0 = graph.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  // CHECK: graph.reduce_sum %{{.*}} axes = [2] keepdims : tensor<2x16x256xf32> -> tensor<2x16x1xf32>
  %1 = graph.reduce_sum %0 axes = [2] keepdims : tensor<2x16x256xf32> -> tensor<2x16x1xf32>
  // CHECK: graph.reduce_mean %{{.*}} axes = [0, 2] : tensor<2x16x256xf32> -> tensor<16xf32>
  %2 = graph.reduce_mean %0 axes = [0, 2] : tensor<2x16x256xf32> -> tensor<16xf32>
  // CHECK: graph.reduce_max
  %3 = graph.reduce_max %0 axes = [1] : tensor<2x16x256xf32> -> tensor<2x256xf32>
  // CHECK: graph.reduce_sum_square %{{.*}} axes = [0, 1, 2] : tensor<2x16x256xf32> -> tensor<f32>
  %sq = graph.reduce_sum_square %0 axes = [0, 1, 2] : tensor<2x16x256xf32> -> tensor<f32>
  // CHECK: graph.softmax %{{.*}} axis = 2 : tensor<2x16x256xf32>
  %4 = graph.softmax %0 axis = 2 : tensor<2x16x256xf32>
  // CHECK: graph.log_softmax %{{.*}} axis = 1 : tensor<2x16x256xf32>
  %5 = graph.log_softmax %4 axis = 1 : tensor<2x16x256xf32>
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 2 epsilon = 9.99999974E-6 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %6 = graph.layer_norm %x, %g, %g axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}} axis = 2 epsilon
  %7 = graph.layer_norm %6, %g axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK: graph.gather %{{.*}}, %{{.*}} axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  %8 = graph.gather %table, %ids axis = 0 : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  // CHECK: graph.reshape %{{.*}} : tensor<2x16x64xf32> -> tensor<32x64xf32>
  %9 = graph.reshape %8 : tensor<2x16x64xf32> -> tensor<32x64xf32>
  // CHECK: graph.transpose %{{.*}} perm = [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  %10 = graph.transpose %9 perm = [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  // CHECK: graph.slice %{{.*}} offsets = [63, 0] strides = [-2, 1] : tensor<64x32xf32> -> tensor<32x32xf32>
  %11 = graph.slice %10 offsets = [63, 0] strides = [-2, 1] : tensor<64x32xf32> -> tensor<32x32xf32>
  // CHECK: graph.concat %{{.*}}, %{{.*}} axis = 0 : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<96x32xf32>
  %12 = graph.concat %10, %11 axis = 0 : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<96x32xf32>
  // CHECK: graph.broadcast %{{.*}} : tensor<64xf32> -> tensor<2x16x64xf32>
  %13 = graph.broadcast %g : tensor<64xf32> -> tensor<2x16x64xf32>
  // CHECK: graph.trilu %{{.*}} upper k = 1 : tensor<32x32xf32>
  %14 = graph.trilu %11 upper k = 1 : tensor<32x32xf32>
  // CHECK: graph.trilu %{{.*}} k = -1 : tensor<32x32xf32>
  %15 = graph.trilu %14 k = -1 : tensor<32x32xf32>
  // CHECK: graph.cast %{{.*}} : tensor<2x16xi64> -> tensor<2x16xf32>
  %16 = graph.cast %ids : tensor<2x16xi64> -> tensor<2x16xf32>
  return %13 : tensor<2x16x64xf32>
}

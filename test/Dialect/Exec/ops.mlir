// RUN: strata-opt %s | strata-opt | FileCheck %s

// Tests that exec ops round-trip.
// CHECK-LABEL: func.func @main()
// CHECK-SAME: exec.arena_bytes = 128
// CHECK: %[[X:.+]] = exec.input "x" {offset = 0 : i64} : tensor<2x4xf32>
// CHECK: %[[W:.+]] = exec.param "w" trainable {offset = 0 : i64, value = dense<1.000000e+00> : tensor<4x8xf32>} : tensor<4x8xf32>
// CHECK: %[[C:.+]] = exec.param "c" constant {offset = 4096 : i64, value = dense<2> : tensor<i64>} : tensor<i64>
// CHECK: %[[Y:.+]] = exec.kernel "matmul"(%[[X]], %[[W]]) {offset = 64 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S:.+]] = exec.kernel "softmax"(%[[Y]]) {ints = array<i64: 1>, offset = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[V:.+]] = exec.view %[[S]] : tensor<2x8xf32> -> tensor<16xf32>
// CHECK: exec.output "y" %[[V]] : tensor<16xf32>
func.func @main() attributes {exec.arena_bytes = 128 : i64, exec.params_bytes = 8192 : i64} {
  %x = exec.input "x" {offset = 0 : i64} : tensor<2x4xf32>
  %w = exec.param "w" trainable {offset = 0 : i64, value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
  %c = exec.param "c" constant {offset = 4096 : i64, value = dense<2> : tensor<i64>} : tensor<i64>
  %y = exec.kernel "matmul"(%x, %w) {offset = 64 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %s = exec.kernel "softmax"(%y) {ints = array<i64: 1>, offset = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %v = exec.view %s : tensor<2x8xf32> -> tensor<16xf32>
  exec.output "y" %v : tensor<16xf32>
  return
}

// RUN: strata-opt %s --strata-store-narrow | FileCheck %s

// Tests that a widening cast the backward pass reads is made again right
// before its first backward reader, which both backward readers then use,
// while the forward reader keeps the original; and that narrowing casts
// and casts only the forward pass reads are left alone.
// CHECK-LABEL: func.func @logits
// CHECK: %[[L:.+]] = exec.kernel "matmul"
// CHECK-NEXT: %[[W:.+]] = exec.kernel "cast"(%[[L]]) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: exec.kernel "cross_entropy"(%[[W]],
// CHECK-NEXT: %[[F:.+]] = exec.kernel "cast"(%[[L]]) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: exec.kernel "exp"(%[[F]])
// CHECK-NEXT: %[[N:.+]] = exec.kernel "cast"(%{{.+}}) : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[W2:.+]] = exec.kernel "cast"(%[[L]]) {strata.backward} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: exec.kernel "cross_entropy_grad"(%[[W2]], {{.+}}) {strata.backward}
// CHECK-NEXT: exec.kernel "mul"(%[[W2]], %{{.+}}) {strata.backward}
// CHECK-NEXT: exec.kernel "exp"(%[[N]]) {strata.backward}
// CHECK-NOT: "cast"
func.func @logits() {
  %x = exec.input "x" : tensor<4x2xbf16>
  %y = exec.input "y" : tensor<4xi64>
  %s = exec.input "s" : tensor<f32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<2x8xbf16>} : tensor<2x8xbf16>
  %l = exec.kernel "matmul"(%x, %w) {ints = array<i64: 0, 0>} : (tensor<4x2xbf16>, tensor<2x8xbf16>) -> tensor<4x8xbf16>
  %wide = exec.kernel "cast"(%l) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %loss = exec.kernel "cross_entropy"(%wide, %y) : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  %f = exec.kernel "cast"(%l) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %e = exec.kernel "exp"(%f) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = exec.kernel "cast"(%e) : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %d = exec.kernel "cross_entropy_grad"(%wide, %y, %s) {strata.backward} : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %m = exec.kernel "mul"(%wide, %d) {strata.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = exec.kernel "exp"(%n) {strata.backward} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  exec.output "loss" %loss : tensor<f32>
  exec.output "m" %m : tensor<4x8xf32>
  exec.output "b" %b : tensor<4x8xbf16>
  return
}

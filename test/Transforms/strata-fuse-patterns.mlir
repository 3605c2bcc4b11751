// RUN: strata-opt %s --split-input-file --strata-fuse-patterns --verify-diagnostics | FileCheck %s

// Tests that the tanh GELU as torch 1.13 exports it (x*x*x, constants on
// either side) becomes one graph.gelu with the tanh form, and that the
// bias add feeding it stays: the GELU's input is the chain's one input.
// CHECK-LABEL: func.func @gelu_tanh_muls
// CHECK: %[[X:.+]] = graph.add %arg0, %arg1
// CHECK-NEXT: %[[G:.+]] = graph.gelu %[[X]] tanh : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh_muls(%a: tensor<4x8xf32>, %bias: tensor<8xf32>) -> tensor<4x8xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %k = graph.constant dense<0.797884583> : tensor<f32>
  %c = graph.constant dense<4.471500e-02> : tensor<f32>
  %x = graph.add %a, %bias : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %x2 = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x3 = graph.mul %x, %x2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %cx3 = graph.mul %x3, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %in = graph.add %x, %cx3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = graph.mul %in, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %t = graph.tanh %s : tensor<4x8xf32>
  %u = graph.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = graph.mul %x, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-remark @below {{fused 1 GELU (9 elementwise ops)}}
  %y = graph.mul %v, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests the same function written as Hugging Face's gelu_new (pow(x, 3),
// 0.5 * x first), associated differently.
// CHECK-LABEL: func.func @gelu_tanh_pow
// CHECK: %[[G:.+]] = graph.gelu %arg0 tanh : tensor<16xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh_pow(%x: tensor<16xf32>) -> tensor<16xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %three = graph.constant dense<3.000000e+00> : tensor<f32>
  %k = graph.constant dense<0.797884583> : tensor<f32>
  %c = graph.constant dense<4.471500e-02> : tensor<f32>
  %hx = graph.mul %half, %x : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %x3 = graph.pow %x, %three : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %cx3 = graph.mul %c, %x3 : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %in = graph.add %x, %cx3 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %s = graph.mul %k, %in : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %t = graph.tanh %s : tensor<16xf32>
  %u = graph.add %one, %t : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  // expected-remark @below {{fused 1 GELU (8 elementwise ops)}}
  %y = graph.mul %hx, %u : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// Tests the erf GELU (x * 0.5 * (1 + erf(x / sqrt 2))): the exact form.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[G:.+]] = graph.gelu %arg0 : tensor<2x3xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %r2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %r2 : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %e = graph.erf %d : tensor<2x3xf32>
  %u = graph.add %e, %one : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %v = graph.mul %x, %u : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // expected-remark @below {{fused 1 GELU (5 elementwise ops)}}
  %y = graph.mul %v, %half : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests what must not fuse: a chain with another constant (0.05, not
// 0.044715) computes something else (its pow by 3 becomes multiplies); a
// GELU whose tanh is used elsewhere too is not closed (fusing it would
// keep the tanh and recompute the rest).
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: graph.gelu
// CHECK-NOT: graph.pow
// CHECK: graph.tanh
// CHECK: graph.tanh
func.func @not_gelu(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %three = graph.constant dense<3.000000e+00> : tensor<f32>
  %k = graph.constant dense<0.797884583> : tensor<f32>
  %c = graph.constant dense<5.000000e-02> : tensor<f32>
  %c2 = graph.constant dense<4.471500e-02> : tensor<f32>
  // expected-remark @below {{fused 2 pow by a constant as multiplies}}
  %x3 = graph.pow %x, %three : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %cx3 = graph.mul %c, %x3 : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %in = graph.add %x, %cx3 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %s = graph.mul %k, %in : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %t = graph.tanh %s : tensor<16xf32>
  %u = graph.add %one, %t : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %v = graph.mul %x, %u : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %y = graph.mul %v, %half : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %b3 = graph.pow %x, %three : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %bcx3 = graph.mul %c2, %b3 : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %bin = graph.add %x, %bcx3 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %bs = graph.mul %k, %bin : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %bt = graph.tanh %bs : tensor<16xf32>
  %bu = graph.add %one, %bt : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %bv = graph.mul %x, %bu : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %by = graph.mul %bv, %half : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  return %y, %by, %bt : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Tests pow by constants: 2 and 3 become multiplies, 0.5 a square root;
// 2.5 stays.
// CHECK-LABEL: func.func @pows
// CHECK: %[[C:.+]] = graph.constant dense<2.500000e+00>
// CHECK-NEXT: %[[SQ:.+]] = graph.mul %arg0, %arg0
// CHECK-NEXT: %[[SQ2:.+]] = graph.mul %arg0, %arg0
// CHECK-NEXT: %[[CU:.+]] = graph.mul %[[SQ2]], %arg0
// CHECK-NEXT: %[[RT:.+]] = graph.sqrt %arg0
// CHECK-NEXT: %[[P:.+]] = graph.pow %arg0, %[[C]]
// CHECK-NEXT: return %[[SQ]], %[[CU]], %[[RT]], %[[P]]
func.func @pows(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %two = graph.constant dense<2.000000e+00> : tensor<f32>
  %three = graph.constant dense<3.000000e+00> : tensor<f32>
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %other = graph.constant dense<2.500000e+00> : tensor<f32>
  // expected-remark @below {{fused 3 pow by a constant as multiplies}}
  %a = graph.pow %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %b = graph.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %c = graph.pow %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d = graph.pow %x, %other : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %a, %b, %c, %d : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

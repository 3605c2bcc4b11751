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

// -----

// Tests that attention as GPT-2 exports it (k transposed for the product,
// a scalar scale, a constant "drop" mask over the future filled with -inf,
// softmax over the keys, the product with v) becomes one graph.attention
// with the mask recognised as causal, k untransposed by a transpose (which
// the canonicalizer composes with the exporter's into none), and nothing of
// the T x S chain left.
// CHECK-LABEL: func.func @attention_gpt2_causal
// CHECK: %[[KT:.+]] = graph.transpose %arg1 perm = [0, 2, 1]
// CHECK-NEXT: %[[K:.+]] = graph.transpose %[[KT]] perm = [0, 2, 1]
// CHECK-NEXT: %[[O:.+]] = graph.attention %arg0, %[[K]], %arg2 {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: graph.softmax
// CHECK-NOT: graph.select
// CHECK: return %[[O]]
func.func @attention_gpt2_causal(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %kt = graph.transpose %k perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %s = graph.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %scale = graph.constant dense<5.000000e-01> : tensor<f32>
  %c = graph.mul %s, %scale : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %future = graph.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.select %future, %ninf, %c : (tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  // expected-remark @below {{fused 1 attention (scores, softmax and values in one kernel)}}
  %p = graph.softmax %m axis = 2 : tensor<2x3x3xf32>
  %o = graph.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %o : tensor<2x3x5xf32>
}

// -----

// Tests that an additive mask the function receives (padding, say) stays an
// operand of the fused op (mask_kind 1), that a division by a scalar becomes
// the reciprocal scale, and that k given with transpose_rhs needs no
// transpose.
// CHECK-LABEL: func.func @attention_additive_mask
// CHECK: graph.attention %arg0, %arg1, %arg2 mask %arg3 {mask_kind = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK-NOT: graph.softmax
func.func @attention_additive_mask(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x4xf32>, %mask: tensor<2x1x5xf32>) -> tensor<2x3x4xf32> {
  %s = graph.matmul %q, %k {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
  %four = graph.constant dense<4.000000e+00> : tensor<f32>
  %c = graph.div %s, %four : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %m = graph.add %mask, %c : (tensor<2x1x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  // expected-remark @below {{fused 1 attention}}
  %p = graph.softmax %m axis = 2 : tensor<2x3x5xf32>
  %o = graph.matmul %p, %v : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// Tests that a constant mask that is not causal (here it hides the first
// key) stays a mask operand, in its "keep where true" form.
// CHECK-LABEL: func.func @attention_constant_mask_not_causal
// CHECK: graph.attention %arg0, %{{.+}}, %arg2 mask %{{.+}} {fill = -1.000000e+09 : f64, mask_kind = 2 : i64, scale = 1.000000e+00 : f64}
func.func @attention_constant_mask_not_causal(%q: tensor<2x2xf32>, %kt: tensor<2x2xf32>, %v: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %s = graph.matmul %q, %kt : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %keep = graph.constant dense<[[false, true], [false, true]]> : tensor<2x2xi1>
  %fill = graph.constant dense<-1.000000e+09> : tensor<f32>
  %m = graph.select %keep, %s, %fill : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  // expected-remark @below {{fused 1 attention}}
  %p = graph.softmax %m axis = 1 : tensor<2x2xf32>
  %o = graph.matmul %p, %v : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %o : tensor<2x2xf32>
}

// -----

// Tests that attention stays unfused when the probabilities have another
// user (a model returning its attention weights needs them stored), when
// the softmax is not over the keys, and when the mask is computed from a
// parameter (graph.attention gives its mask no gradient).
// CHECK-LABEL: func.func @attention_not_fused
// CHECK-NOT: graph.attention
// CHECK: return
func.func @attention_not_fused(%q: tensor<3x4xf32>, %kt: tensor<4x3xf32>, %v: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %s = graph.matmul %q, %kt : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %p = graph.softmax %s axis = 1 : tensor<3x3xf32>
  %o = graph.matmul %p, %v : (tensor<3x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %s2 = graph.matmul %q, %kt : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %p2 = graph.softmax %s2 axis = 0 : tensor<3x3xf32>
  %o2 = graph.matmul %p2, %v : (tensor<3x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %bias = graph.param "alibi" trainable : tensor<3x3xf32>
  %s3 = graph.matmul %q, %kt : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %m3 = graph.add %s3, %bias : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %p3 = graph.softmax %m3 axis = 1 : tensor<3x3xf32>
  %o3 = graph.matmul %p3, %v : (tensor<3x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %o, %p, %o2, %o3 : tensor<3x4xf32>, tensor<3x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests that a layer norm as exporters before opset 17 write it (means,
// the centred value squared by pow, epsilon, sqrt, division, gamma and
// beta) becomes one graph.layer_norm over the last axis, and that nothing
// of the chain is left.
// CHECK-LABEL: func.func @layer_norm_decomposed
// CHECK-NOT: graph.reduce_mean
// CHECK: %[[Y:.+]] = graph.layer_norm %arg0, %arg1, %arg2 axis = 2 epsilon = 9.99999974E-6 : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_decomposed(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %two = graph.constant dense<2.000000e+00> : tensor<f32>
  %eps = graph.constant dense<9.99999974E-6> : tensor<f32>
  %m = graph.reduce_mean %x axes = [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %d = graph.sub %x, %m : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %s = graph.pow %d, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %v = graph.reduce_mean %s axes = [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %e = graph.add %v, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r = graph.sqrt %e : tensor<2x3x1xf32>
  // expected-remark @below {{fused 1 layer/RMS norm}}
  %n = graph.div %d, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = graph.mul %n, %g : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %z = graph.add %y, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %z : tensor<2x3x8xf32>
}

// -----

// Tests the reciprocal form without gamma or beta (a constant one scale),
// over the last two axes; and that a chain whose centred value is used
// elsewhere is left alone.
// CHECK-LABEL: func.func @layer_norm_reciprocal
// CHECK: %[[ONE:.+]] = graph.constant dense<1.000000e+00> : tensor<3x8xf32>
// CHECK-NEXT: %[[Y:.+]] = graph.layer_norm %arg0, %[[ONE]] axis = 1 epsilon = 1.000000e-03
// CHECK: graph.sqrt
// CHECK: return %[[Y]]
func.func @layer_norm_reciprocal(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %eps = graph.constant dense<1.000000e-03> : tensor<f32>
  %m = graph.reduce_mean %x axes = [1, 2] keepdims : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
  %d = graph.sub %x, %m : (tensor<2x3x8xf32>, tensor<2x1x1xf32>) -> tensor<2x3x8xf32>
  %s = graph.mul %d, %d : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %v = graph.reduce_mean %s axes = [1, 2] keepdims : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
  %e = graph.add %eps, %v : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %r = graph.sqrt %e : tensor<2x1x1xf32>
  %i = graph.reciprocal %r : tensor<2x1x1xf32>
  // expected-remark @below {{fused 1 layer/RMS norm}}
  %n = graph.mul %i, %d : (tensor<2x1x1xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %m2 = graph.reduce_mean %x axes = [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %d2 = graph.sub %x, %m2 : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %s2 = graph.mul %d2, %d2 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %v2 = graph.reduce_mean %s2 axes = [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %e2 = graph.add %v2, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r2 = graph.sqrt %e2 : tensor<2x3x1xf32>
  %n2 = graph.div %d2, %r2 : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  return %n, %n2, %d2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// Tests that RMSNorm as LLaMA exports it (mean of x squared, epsilon,
// sqrt, one over it, times x, times the weight on the left) becomes
// graph.layer_norm with `rms`, x keeping its other use (the residual).
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[Y:.+]] = graph.layer_norm %arg0, %arg1 rms axis = 2 epsilon = 9.99999997E-7
// CHECK: %[[R:.+]] = graph.add %arg0, %[[Y]]
// CHECK: return %[[R]]
func.func @rms_norm(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %two = graph.constant dense<2.000000e+00> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %eps = graph.constant dense<9.99999997E-7> : tensor<f32>
  %s = graph.pow %x, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %v = graph.reduce_mean %s axes = [2] keepdims : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %e = graph.add %v, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r = graph.sqrt %e : tensor<2x3x1xf32>
  %i = graph.div %one, %r : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  // expected-remark @below {{fused 1 layer/RMS norm}}
  %n = graph.mul %x, %i : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = graph.mul %w, %n : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %res = graph.add %x, %y : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %res : tensor<2x3x8xf32>
}

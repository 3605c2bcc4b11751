// RUN: strata-opt %s --split-input-file --strata-autocast="precision=bf16" | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-autocast="precision=fp32" | FileCheck %s --check-prefix=FP32
// RUN: not strata-opt %s --split-input-file --strata-autocast="precision=int8" 2>&1 | FileCheck %s --check-prefix=BAD

// Tests the policy on a linear layer, a residual and the loss: the layer
// norm runs in fp32; the product takes bf16 copies of its input and of the
// fp32 weight; the bias (a weight) follows the bf16 activation; the
// residual add of an fp32 and a bf16 activation widens to fp32; the loss
// reads the fp32 residual. Parameters and the result stay fp32.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.+]] = graph.param "w" trainable {{.*}} : tensor<8x8xf32>
// CHECK: %[[B:.+]] = graph.param "b" trainable {{.*}} : tensor<8xf32>
// CHECK: %[[N:.+]] = graph.layer_norm %arg0, %{{.+}}, %{{.+}} axis = 1 {{.*}} -> tensor<4x8xf32>
// CHECK: %[[N16:.+]] = graph.cast %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[W16:.+]] = graph.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK: %[[Y:.+]] = graph.matmul %[[N16]], %[[W16]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[B16:.+]] = graph.cast %[[B]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK: %[[YB:.+]] = graph.add %[[Y]], %[[B16]] : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[YW:.+]] = graph.cast %[[YB]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[R:.+]] = graph.add %arg0, %[[YW]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[L:.+]] = graph.cross_entropy %[[R]], %arg1 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: return %[[L]] : tensor<f32>
// FP32-LABEL: func.func @main
// FP32-NOT: graph.cast
// BAD: unknown precision 'int8' (expected fp32, bf16 or fp16)
func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32> {graph.name = "loss"}) {
  %w = graph.param "w" trainable {initial_value = dense<0.5> : tensor<8x8xf32>} : tensor<8x8xf32>
  %b = graph.param "b" trainable {initial_value = dense<0.1> : tensor<8xf32>} : tensor<8xf32>
  %g = graph.param "g" trainable {initial_value = dense<1.0> : tensor<8xf32>} : tensor<8xf32>
  %beta = graph.param "beta" trainable {initial_value = dense<0.0> : tensor<8xf32>} : tensor<8xf32>
  %n = graph.layer_norm %x, %g, %beta axis = 1 epsilon = 1.0E-5 : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = graph.matmul %n, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %yb = graph.add %y, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = graph.add %x, %yb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = graph.cross_entropy %r, %labels : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a returned low-precision value is cast back to the declared
// fp32 result, and that arithmetic on weights alone stays as it is.
// CHECK-LABEL: func.func @main
// CHECK: %[[S:.+]] = graph.mul %{{.+}}, %{{.+}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[Y:.+]] = graph.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[Y32:.+]] = graph.cast %[[Y]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: return %[[Y32]] : tensor<4x8xf32>
// FP32-LABEL: func.func @main
// FP32-NOT: graph.cast
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = graph.param "w" trainable {initial_value = dense<0.5> : tensor<8x8xf32>} : tensor<8x8xf32>
  %s = graph.mul %w, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = graph.matmul %x, %s : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a trainable fp16 or bf16 parameter (a model exported in half
// precision) becomes an fp32 master holding the same values, read through
// a cast to its own type, even at precision fp32; a frozen one stays as it
// is.
// CHECK-LABEL: func.func @main
// CHECK: %[[M:.+]] = graph.param "w" trainable {initial_value = dense_resource<w> : tensor<2xf32>} : tensor<2xf32>
// CHECK-NEXT: %[[H:.+]] = graph.cast %[[M]] : tensor<2xf32> -> tensor<2xf16>
// CHECK: graph.param "frozen" {{.*}} : tensor<2xf16>
// CHECK: graph.param "v" trainable {initial_value = dense_resource<v> : tensor<1xf32>} : tensor<1xf32>
// CHECK-NEXT: graph.cast %{{.+}} : tensor<1xf32> -> tensor<1xbf16>
// CHECK: graph.mul %arg0, %[[H]] : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
// 1.5, -2.0 and 0.5 as floats, little-endian, after the blobs' alignment.
// CHECK: w: "0x040000000000C03F000000C0"
// CHECK: v: "0x040000000000003F"
// FP32-LABEL: func.func @main
// FP32: graph.param "w" trainable {{.*}} : tensor<2xf32>
// FP32-NEXT: graph.cast
func.func @main(%x: tensor<2xf16>) -> (tensor<f32> {graph.name = "loss"}) {
  %w = graph.param "w" trainable {initial_value = dense<[1.5, -2.0]> : tensor<2xf16>} : tensor<2xf16>
  %f = graph.param "frozen" {initial_value = dense<[1.0, 2.0]> : tensor<2xf16>} : tensor<2xf16>
  %v = graph.param "v" trainable {initial_value = dense<[0.5]> : tensor<1xbf16>} : tensor<1xbf16>
  %vs = graph.cast %v : tensor<1xbf16> -> tensor<1xf32>
  %y = graph.mul %x, %w : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %z = graph.mul %y, %f : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %c = graph.cast %z : tensor<2xf16> -> tensor<2xf32>
  %c2 = graph.mul %c, %vs : (tensor<2xf32>, tensor<1xf32>) -> tensor<2xf32>
  %l = graph.reduce_sum %c2 axes = [0] : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the loss reads bf16 logits as they are (its kernels widen as
// they load; no fp32 copy of the logits) and gives an fp32 loss.
// CHECK-LABEL: func.func @main
// CHECK: %[[Z:.+]] = graph.matmul {{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: %[[L:.+]] = graph.cross_entropy %[[Z]], %arg1 : (tensor<4x8xbf16>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32> {graph.name = "loss"}) {
  %w = graph.param "w" trainable {initial_value = dense<0.5> : tensor<8x8xf32>} : tensor<8x8xf32>
  %z = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = graph.cross_entropy %z, %labels : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

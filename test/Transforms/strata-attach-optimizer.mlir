// RUN: strata-opt %s --strata-attach-optimizer="optimizer=adamw lr=0.01 clip-grad-norm=1.0" | FileCheck %s
// RUN: strata-opt %s --strata-attach-optimizer="optimizer=momentum lr=0.5" | FileCheck %s --check-prefix=MOM

// Tests that gradients become in-place updates placed before the return,
// with their optimizer state, a global norm and clipping scale.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"}, tensor<f32> {graph.name = "grad_norm"})
// CHECK: %[[W:.+]] = graph.param "w" trainable
// CHECK-NEXT: %[[V:.+]] = train.state "w.exp_avg_sq" : tensor<3xf32>
// CHECK-NEXT: %[[M:.+]] = train.state "w.exp_avg" : tensor<3xf32>
// The global norm squares and sums each gradient in one pass.
// CHECK: %[[SQ:.+]] = graph.reduce_sum_square %arg0 axes = [0] {{.*}}: tensor<3xf32> -> tensor<f32>
// CHECK: %[[NORM:.+]] = graph.sqrt %[[SQ]]
// CHECK: %[[SCALE:.+]] = graph.min
// CHECK: train.update_adamw %[[W]], %{{.+}}, %[[M]], %[[V]] scale %[[SCALE]] : tensor<f32> {{{.*}}lr = 1.000000e-02{{.*}}} : tensor<3xf32>
// CHECK-NEXT: return %{{.+}}, %[[NORM]]
// MOM: train.state "w.momentum_buffer"
// MOM: train.update_momentum
// MOM-NOT: scale
func.func @main(%x: tensor<3xf32>) -> (tensor<f32> {graph.name = "loss"}, tensor<3xf32> {graph.grad_of = "w"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

// RUN: strata-opt %s --strata-attach-optimizer="optimizer=adamw lr=0.01 clip-grad-norm=1.0" | FileCheck %s
// RUN: strata-opt %s --strata-attach-optimizer="optimizer=momentum lr=0.5" | FileCheck %s --check-prefix=MOM
// RUN: strata-opt %s --strata-attach-optimizer="optimizer=sgd lr=0.1 accumulate=2 clip-grad-norm=1.0" | FileCheck %s --check-prefix=ACC

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
// With accumulation the norm is of the step's whole gradient: the
// accumulator plus this micro-batch's, read before it is added in and
// divided by N as the update divides it.
// ACC: %[[ACC:.+]] = train.state "w.grad_accum"
// ACC: %[[SUM:.+]] = graph.add %[[ACC]], %arg0
// ACC: %[[SQ:.+]] = graph.reduce_sum_square %[[SUM]]
// ACC: %[[ROOT:.+]] = graph.sqrt %[[SQ]]
// ACC: %[[N:.+]] = graph.constant {{.*}}dense<2.000000e+00>
// ACC: %[[NORM:.+]] = graph.div %[[ROOT]], %[[N]]
// ACC: %[[SCALE:.+]] = graph.min
// ACC: train.accumulate %[[ACC]], %arg0
// ACC-NEXT: train.update_sgd %{{.+}}, %[[ACC]] scale %[[SCALE]] {{.*}}accumulate = 2
// ACC-NEXT: return %{{.+}}, %[[NORM]]
// MOM: train.state "w.momentum_buffer"
// MOM: train.update_momentum
// MOM-NOT: scale
func.func @main(%x: tensor<3xf32>) -> (tensor<f32> {graph.name = "loss"}, tensor<3xf32> {graph.grad_of = "w"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c = graph.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<3xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<3xf32>
}

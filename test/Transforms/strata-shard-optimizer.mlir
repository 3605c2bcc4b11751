// RUN: strata-opt %s --strata-data-parallel="data-parallel=2 shard-optimizer=true" --strata-attach-optimizer="optimizer=adamw lr=0.01 clip-grad-norm=1.0" | FileCheck %s
// RUN: strata-opt %s --strata-data-parallel="data-parallel=4 shard-optimizer=true" --strata-attach-optimizer="optimizer=sgd lr=0.1 accumulate=2" | FileCheck %s --check-prefix=ACC
// RUN: not strata-opt %s --strata-data-parallel="data-parallel=2 shard-optimizer=true" --strata-attach-optimizer="optimizer=adalomo lr=0.01" 2>&1 | FileCheck %s --check-prefix=ADALOMO
// RUN: not strata-opt %s --strata-data-parallel="data-parallel=1 shard-optimizer=true" 2>&1 | FileCheck %s --check-prefix=ONE

// Sharded optimizer state (ZeRO stages 1 and 2): the gradient of 5
// elements is reduce-scattered into this rank's shard of ceil(5 / 2) = 3
// (zero-padded), the states are of the shard's size, the update works on
// a copy of the parameter's shard, and every rank's updated shard is
// gathered back into the parameter.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.name = "loss"}, tensor<f32> {graph.name = "grad_norm"})
// CHECK: %[[G:.+]] = train.reduce_scatter %arg0 {ranks = 2 : i64, strata.backward} : tensor<5xf32> -> tensor<3xf32>
// CHECK: %[[W:.+]] = graph.param "w" trainable
// CHECK-NEXT: %[[V:.+]] = train.state "w.exp_avg_sq" : tensor<3xf32>
// CHECK-NEXT: %[[M:.+]] = train.state "w.exp_avg" : tensor<3xf32>
// The norm is of the whole gradient: each rank's sum of its shard's
// squares, averaged over the ranks (part of the backward pass), times 2.
// CHECK: %[[SQ:.+]] = graph.reduce_sum_square %[[G]] axes = [0] {{.*}}: tensor<3xf32> -> tensor<f32>
// CHECK-NEXT: %[[MEAN:.+]] = train.all_reduce %[[SQ]] {ranks = 2 : i64, strata.backward}
// CHECK-NEXT: %[[TWO:.+]] = graph.constant {{.*}}dense<2.000000e+00>
// CHECK-NEXT: %[[SUM:.+]] = graph.mul %[[MEAN]], %[[TWO]]
// CHECK-NEXT: %[[NORM:.+]] = graph.sqrt %[[SUM]]
// CHECK: %[[SCALE:.+]] = graph.min
// CHECK: %[[WS:.+]] = train.shard %[[W]] {ranks = 2 : i64} : tensor<5xf32> -> tensor<3xf32>
// CHECK-NEXT: train.update_adamw %[[WS]], %[[G]], %[[M]], %[[V]] scale %[[SCALE]] : tensor<f32> {{.*}} : tensor<3xf32>
// CHECK-NEXT: train.all_gather %[[W]], %[[WS]] {ranks = 2 : i64} : tensor<5xf32>, tensor<3xf32>
// CHECK-NEXT: return %{{.+}}, %[[NORM]]
// Accumulation sums this rank's shards: an accumulator of the shard's
// size (ceil(5 / 4) = 2).
// ACC: %[[G:.+]] = train.reduce_scatter %arg0 {ranks = 4 : i64, strata.backward} : tensor<5xf32> -> tensor<2xf32>
// ACC: %[[ACC:.+]] = train.state "w.grad_accum" : tensor<2xf32>
// ACC: train.accumulate %[[ACC]], %[[G]]
// ACC-NEXT: train.update_sgd %{{.+}}, %[[ACC]] {{.*}}accumulate = 2
// ACC-NEXT: train.all_gather
// ADALOMO: adalomo's factored states (a row and a column per matrix) do not shard by elements
// ONE: shard-optimizer shards the optimizer over the data-parallel ranks: it needs data-parallel of 2 or more
func.func @main(%x: tensor<5xf32>) -> (tensor<f32> {graph.name = "loss"}, tensor<5xf32> {graph.grad_of = "w"}) {
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<5xf32>} : tensor<5xf32>
  %c = graph.mul %w, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %l = graph.reduce_sum %c axes = [0] : tensor<5xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<5xf32>
}

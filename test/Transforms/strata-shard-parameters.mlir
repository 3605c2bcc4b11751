// RUN: strata-opt %s --strata-data-parallel="data-parallel=2 shard-parameters=true shard-optimizer=true" --strata-attach-optimizer="optimizer=sgd lr=0.1" | FileCheck %s
// RUN: strata-opt %s --strata-data-parallel="data-parallel=4 shard-parameters=true" | FileCheck %s --check-prefix=FOUR
// RUN: not strata-opt %s --strata-data-parallel="data-parallel=1 shard-parameters=true" 2>&1 | FileCheck %s --check-prefix=ONE

// Sharded parameters (ZeRO stage 3): each rank stores ceil(5 / 2) = 3
// elements of the trainable "w", and the whole is gathered (unshard) just
// before the forward pass's first reader and again before the backward
// pass's; a low-precision read is a cast of the shard, gathered at the low
// precision. The frozen "f" stays whole. The update writes the stored
// shard in place: there is no shard copy and no all-gather.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.+]] = graph.param "f" {initial_value = {{.*}}} : tensor<5xf32>
// CHECK: %[[S:.+]] = graph.param "w" trainable {initial_value = dense<1.000000e+00> : tensor<5xf32>, shard_ranks = 2 : i64} : tensor<3xf32>
// CHECK-NEXT: %[[L:.+]] = graph.cast %[[S]] : tensor<3xf32> -> tensor<3xbf16>
// CHECK-NOT: strata.backward
// CHECK: %[[W:.+]] = train.unshard %[[S]] {ranks = 2 : i64} : tensor<3xf32> -> tensor<5xf32>
// CHECK-NEXT: graph.mul %[[W]], %arg0
// CHECK: %[[W16:.+]] = train.unshard %[[L]] {ranks = 2 : i64} : tensor<3xbf16> -> tensor<5xbf16>
// CHECK-NEXT: graph.cast %[[W16]]
// CHECK: %[[WB:.+]] = train.unshard %[[S]] {ranks = 2 : i64, strata.backward} : tensor<3xf32> -> tensor<5xf32>
// CHECK-NEXT: graph.mul %[[WB]], %arg0 {strata.backward}
// CHECK: %[[G:.+]] = train.reduce_scatter {{.*}} -> tensor<3xf32>
// CHECK-NOT: train.shard
// CHECK: train.update_sgd %[[S]], %[[G]] {{.*}}: tensor<3xf32>
// CHECK-NOT: train.all_gather
// CHECK: return
// FOUR: graph.param "w" trainable {{.*}}shard_ranks = 4 : i64} : tensor<2xf32>
// FOUR: train.unshard %{{.+}} {ranks = 4 : i64} : tensor<2xf32> -> tensor<5xf32>
// (shard-parameters implies shard-optimizer: the gradient is this rank's
// shard of the mean, of the stored shard's size.)
// FOUR: train.reduce_scatter {{.*}} -> tensor<2xf32>
// ONE: shard-parameters shards the parameters over the data-parallel ranks: it needs data-parallel of 2 or more
func.func @main(%x: tensor<5xf32>) -> (tensor<f32> {graph.name = "loss"}, tensor<5xf32> {graph.grad_of = "w"}) {
  %f = graph.param "f" {initial_value = dense<2.0> : tensor<5xf32>} : tensor<5xf32>
  %w = graph.param "w" trainable {initial_value = dense<1.0> : tensor<5xf32>} : tensor<5xf32>
  %c = graph.mul %w, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %h = graph.cast %w : tensor<5xf32> -> tensor<5xbf16>
  %hf = graph.cast %h : tensor<5xbf16> -> tensor<5xf32>
  %d = graph.mul %c, %f : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %e = graph.add %d, %hf : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %l = graph.reduce_sum %e axes = [0] : tensor<5xf32> -> tensor<f32>
  %g = graph.mul %w, %x {strata.backward} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %l, %g : tensor<f32>, tensor<5xf32>
}

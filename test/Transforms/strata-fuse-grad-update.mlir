// RUN: strata-opt %s --split-input-file --strata-fuse-grad-update --verify-diagnostics | FileCheck %s

// Tests that each update moves to just after its gradient's last
// contribution and the last read of its parameter (here the backward read
// of w2 by the input gradient), ahead of later gradients; the norm chain
// moves next to each gradient.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[G2:.+]] = graph.matmul %{{.+}}, %{{.+}} {strata.backward}
// CHECK-NEXT: graph.mul %[[G2]], %[[G2]]
// CHECK: %[[DX:.+]] = graph.matmul %{{.+}}, %[[W2:.+]] {strata.backward}
// CHECK-NEXT: train.update_sgd %[[W2]], %[[G2]]
// CHECK: %[[G1:.+]] = graph.matmul
// CHECK-NEXT: train.update_sgd %{{.+}}, %[[G1]]
// CHECK-NEXT: graph.mul %[[G1]], %[[G1]]
// CHECK: return
func.func @two_layers(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<f32>, tensor<f32>) {
  %w1 = graph.param "w1" trainable : tensor<4x4xf32>
  %w2 = graph.param "w2" trainable : tensor<4x4xf32>
  %h = graph.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y = graph.matmul %h, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = graph.reduce_sum %y axes = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  %ht = graph.transpose %h perm = [1, 0] {strata.backward} : tensor<2x4xf32> -> tensor<4x2xf32>
  %g2 = graph.matmul %ht, %dy {strata.backward} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %w2t = graph.transpose %w2 perm = [1, 0] {strata.backward} : tensor<4x4xf32> -> tensor<4x4xf32>
  %dh = graph.matmul %dy, %w2 {strata.backward} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %xt = graph.transpose %x perm = [1, 0] {strata.backward} : tensor<2x4xf32> -> tensor<4x2xf32>
  %g1 = graph.matmul %xt, %dh {strata.backward} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %s2 = graph.mul %g2, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n2 = graph.reduce_sum %s2 axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %s1 = graph.mul %g1, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n1 = graph.reduce_sum %s1 axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %t = graph.add %n2, %n1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %norm = graph.sqrt %t : tensor<f32>
  train.update_sgd %w2, %g2 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
  train.update_sgd %w1, %g1 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
  return %l, %norm : tensor<f32>, tensor<f32>
}

// -----

// Tests that an update clipped by this step's global norm cannot move, and
// that the pass says why.
func.func @clipped(%g1: tensor<4xf32>, %g2: tensor<4xf32>) -> (tensor<f32>, tensor<f32>) {
  %w1 = graph.param "w1" trainable : tensor<4xf32>
  %w2 = graph.param "w2" trainable : tensor<4xf32>
  %s1 = graph.mul %g1, %g1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n1 = graph.reduce_sum %s1 axes = [0] : tensor<4xf32> -> tensor<f32>
  %s2 = graph.mul %g2, %g2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n2 = graph.reduce_sum %s2 axes = [0] : tensor<4xf32> -> tensor<f32>
  %t = graph.add %n1, %n2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %norm = graph.sqrt %t : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %scale = graph.min %norm, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // expected-remark @+1 {{cannot fuse 2 updates: their scale depends on the global norm of this step's gradients}}
  train.update_sgd %w1, %g1 scale %scale : tensor<f32> {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  train.update_sgd %w2, %g2 scale %scale : tensor<f32> {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return %norm, %norm : tensor<f32>, tensor<f32>
}

// -----

// Tests that with accumulation each update stays after the accumulation
// it reads: both move up to the gradient, the accumulation first.
// CHECK-LABEL: func.func @accumulated
// CHECK: %[[ACC:.+]] = train.state "w.grad_accum"
// CHECK: %[[G:.+]] = graph.mul %{{.+}}, %{{.+}} {strata.backward}
// CHECK-NEXT: train.accumulate %[[ACC]], %[[G]]
// CHECK-NEXT: train.update_sgd %{{.+}}, %[[ACC]]
// CHECK-NEXT: graph.mul %[[G]], %arg1
func.func @accumulated(%x: tensor<4xf32>, %dy: tensor<4xf32>) -> (tensor<f32>, tensor<f32>) {
  %w = graph.param "w" trainable : tensor<4xf32>
  %acc = train.state "w.grad_accum" : tensor<4xf32>
  %g = graph.mul %x, %dy {strata.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = graph.mul %g, %dy {strata.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = graph.reduce_sum %m axes = [0] : tensor<4xf32> -> tensor<f32>
  train.accumulate %acc, %g : tensor<4xf32>
  train.update_sgd %w, %acc {accumulate = 2 : i64, lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// Tests that under data parallel an update does not go right after its
// gradient's all-reduce (the compute would wait for the collective) but
// after the later all-reduces until they carry as many bytes as it: w3's
// 64 bytes need both later ones, w2's 16 the next, and w1 has none after it.
// CHECK-LABEL: func.func @after_later_all_reduces
// CHECK: %[[M3:.+]] = train.all_reduce
// CHECK-NEXT: graph.mul
// CHECK-NEXT: %[[M2:.+]] = train.all_reduce
// CHECK-NEXT: graph.mul
// CHECK-NEXT: %[[M1:.+]] = train.all_reduce
// CHECK-NEXT: train.update_sgd %{{.+}}, %[[M3]]
// CHECK-NEXT: train.update_sgd %{{.+}}, %[[M2]]
// CHECK-NEXT: train.update_sgd %{{.+}}, %[[M1]]
// CHECK-NEXT: return
func.func @after_later_all_reduces(%a: tensor<4x4xf32>, %b: tensor<4xf32>, %c: tensor<4x4xf32>) -> tensor<f32> {
  %w1 = graph.param "w1" trainable : tensor<4x4xf32>
  %w2 = graph.param "w2" trainable : tensor<4xf32>
  %w3 = graph.param "w3" trainable : tensor<4x4xf32>
  %l = graph.reduce_sum %a axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %g3 = graph.mul %a, %a {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = train.all_reduce %g3 {ranks = 2 : i64} : tensor<4x4xf32>
  %g2 = graph.mul %b, %b {strata.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = train.all_reduce %g2 {ranks = 2 : i64} : tensor<4xf32>
  %g1 = graph.mul %c, %c {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = train.all_reduce %g1 {ranks = 2 : i64} : tensor<4x4xf32>
  train.update_sgd %w3, %m3 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
  train.update_sgd %w2, %m2 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  train.update_sgd %w1, %m1 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
  return %l : tensor<f32>
}

// -----

// Tests that under data parallel the gradient norm's terms do not go right
// after their all-reduces either (the kernels after would wait for each
// collective) but after the later ones, as updates do: every term here
// after the last all-reduce.
// CHECK-LABEL: func.func @norm_after_later_all_reduces
// CHECK: %[[M3:.+]] = train.all_reduce
// CHECK-NEXT: graph.mul %arg1, %arg1
// CHECK-NEXT: %[[M2:.+]] = train.all_reduce
// CHECK-NEXT: graph.mul %arg2, %arg2
// CHECK-NEXT: %[[M1:.+]] = train.all_reduce
// CHECK-DAG: graph.mul %[[M3]], %[[M3]]
// CHECK-DAG: graph.mul %[[M2]], %[[M2]]
// CHECK-DAG: graph.mul %[[M1]], %[[M1]]
// CHECK: graph.sqrt
// CHECK: return
func.func @norm_after_later_all_reduces(%a: tensor<4x4xf32>, %b: tensor<4xf32>, %c: tensor<4x4xf32>) -> (tensor<f32>, tensor<f32>) {
  %l = graph.reduce_sum %a axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %g3 = graph.mul %a, %a {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = train.all_reduce %g3 {ranks = 2 : i64} : tensor<4x4xf32>
  %g2 = graph.mul %b, %b {strata.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m2 = train.all_reduce %g2 {ranks = 2 : i64} : tensor<4xf32>
  %g1 = graph.mul %c, %c {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = train.all_reduce %g1 {ranks = 2 : i64} : tensor<4x4xf32>
  %s3 = graph.mul %m3, %m3 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n3 = graph.reduce_sum %s3 axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %s2 = graph.mul %m2, %m2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n2 = graph.reduce_sum %s2 axes = [0] : tensor<4xf32> -> tensor<f32>
  %s1 = graph.mul %m1, %m1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n1 = graph.reduce_sum %s1 axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %t = graph.add %n3, %n2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %u = graph.add %t, %n1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %norm = graph.sqrt %u : tensor<f32>
  return %l, %norm : tensor<f32>, tensor<f32>
}

// -----

// Tests that a sharded update (--shard-optimizer) moves into the backward
// pass with the copy of its parameter's shard and the all-gather that
// writes the parameter back, after the last read of the parameter (here
// w1's backward read) and past the later reduce-scatters until they carry
// its bytes (w2's 64 need the next one).
// CHECK-LABEL: func.func @sharded_updates
// CHECK: %[[W1:.+]] = graph.param "w1"
// CHECK-NEXT: %[[W2:.+]] = graph.param "w2"
// CHECK: %[[S2:.+]] = train.reduce_scatter
// CHECK: %[[S1:.+]] = train.reduce_scatter
// CHECK-NEXT: %[[W2S:.+]] = train.shard %[[W2]] {ranks = 2 : i64}
// CHECK-NEXT: train.update_sgd %[[W2S]], %[[S2]]
// CHECK-NEXT: train.all_gather %[[W2]], %[[W2S]]
// CHECK-NEXT: graph.mul %{{.+}}, %[[W1]] {strata.backward}
// CHECK-NEXT: %[[W1S:.+]] = train.shard %[[W1]]
// CHECK-NEXT: train.update_sgd %[[W1S]], %[[S1]]
// CHECK-NEXT: train.all_gather %[[W1]], %[[W1S]]
// CHECK-NEXT: return
func.func @sharded_updates(%a: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<f32> {
  %w1 = graph.param "w1" trainable : tensor<4x4xf32>
  %w2 = graph.param "w2" trainable : tensor<4x4xf32>
  %l = graph.reduce_sum %a axes = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %g2 = graph.mul %a, %w2 {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s2 = train.reduce_scatter %g2 {ranks = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
  %g1 = graph.mul %c, %c {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s1 = train.reduce_scatter %g1 {ranks = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
  %dx = graph.mul %g1, %w1 {strata.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %w2s = train.shard %w2 {ranks = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
  train.update_sgd %w2s, %s2 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<8xf32>
  train.all_gather %w2, %w2s {ranks = 2 : i64} : tensor<4x4xf32>, tensor<8xf32>
  %w1s = train.shard %w1 {ranks = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
  train.update_sgd %w1s, %s1 {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<8xf32>
  train.all_gather %w1, %w1s {ranks = 2 : i64} : tensor<4x4xf32>, tensor<8xf32>
  return %l : tensor<f32>
}

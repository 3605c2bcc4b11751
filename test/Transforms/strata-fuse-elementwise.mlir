// RUN: strata-opt %s --split-input-file --strata-fuse-elementwise --verify-diagnostics | FileCheck %s

// Tests that a bias add feeding a GELU and a residual add become one
// graph.fused with the values used outside (the pre-activation, the sum) as
// its results, the bias broadcast as an input and the splat constant
// cloned into the body; the reduction stays outside.
// CHECK-LABEL: func.func @bias_gelu_residual
// CHECK: %[[F:.+]]:2 = graph.fused %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>, %[[R:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[H:.+]] = graph.constant dense<5.000000e-01>
// CHECK-NEXT: %[[X:.+]] = graph.add %[[A]], %[[B]]
// CHECK-NEXT: %[[G:.+]] = graph.gelu %[[X]] tanh
// CHECK-NEXT: %[[M:.+]] = graph.mul %[[G]], %[[H]]
// CHECK-NEXT: %[[S:.+]] = graph.add %[[M]], %[[R]]
// CHECK-NEXT: graph.yield %[[X]], %[[S]]
// CHECK: graph.reduce_sum %[[F]]#0
// CHECK: return %[[F]]#1
func.func @bias_gelu_residual(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %r: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  // expected-remark @below {{fused 1 elementwise chain (4 ops)}}
  %x = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %g = graph.gelu %x tanh : tensor<4x8xf32>
  %m = graph.mul %g, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = graph.add %m, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = graph.reduce_sum %x axes = [0] : tensor<4x8xf32> -> tensor<8xf32>
  return %s, %sum : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests that an op does not join a chain when a value of the chain is used
// before it outside the chain (the fused op would have to come after that
// use): the reduction of %e sits between %e and %n, so %n starts a chain
// of its own and neither chain reaches two ops.
// CHECK-LABEL: func.func @order_is_kept
// CHECK-NOT: graph.fused
// CHECK: %[[E:.+]] = graph.exp %arg0
// CHECK-NEXT: %[[R:.+]] = graph.reduce_sum %[[E]]
// CHECK-NEXT: %[[D:.+]] = graph.div %[[E]], %[[R]]
func.func @order_is_kept(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : tensor<4x8xf32>
  %r = graph.reduce_sum %e axes = [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = graph.div %e, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// Tests that ops of different shapes, of the backward pass and of the
// forward pass, stay in separate chains.
// CHECK-LABEL: func.func @shapes_and_parts
// CHECK: graph.fused %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: graph.fused %{{.+}} {strata.backward} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: graph.neg %{{.+}} : tensor<8xf32>
func.func @shapes_and_parts(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  // expected-remark @below {{fused 2 elementwise chains (4 ops)}}
  %a = graph.exp %x : tensor<4x8xf32>
  %b = graph.tanh %a : tensor<4x8xf32>
  %c = graph.neg %b {strata.backward} : tensor<4x8xf32>
  %d = graph.exp %c {strata.backward} : tensor<4x8xf32>
  %r = graph.reduce_sum %b axes = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %n = graph.neg %r : tensor<8xf32>
  return %d, %n : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Tests that a chain does not span an optimizer update: once lowered the
// update writes %w in place, so the multiply reading %w must stay before
// it. The ops on each side of the update may still fuse with their own
// side.
// CHECK-LABEL: func.func @updates_are_barriers
// CHECK: %[[A:.+]] = graph.mul %arg0, %arg1
// CHECK-NEXT: train.update_sgd %arg0, %arg1
// CHECK-NEXT: %[[B:.+]] = graph.exp %[[A]]
func.func @updates_are_barriers(%w: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.mul %w, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  train.update_sgd %w, %g {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  %b = graph.exp %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

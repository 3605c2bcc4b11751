// RUN: strata-opt %s --strata-graph-cleanup | FileCheck %s

// Tests that the cleanup pipeline folds constant computations, merges
// duplicate ops and removes dead ones, but keeps unused parameters.
// CHECK-LABEL: func.func @cleanup
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-DAG: graph.param "unused" trainable
// CHECK-DAG: %[[C:.+]] = graph.constant dense<3.000000e+00> : tensor<4xf32>
// CHECK: %[[E:.+]] = graph.exp %[[X]]
// CHECK-NOT: graph.exp
// CHECK: %[[M:.+]] = graph.mul %[[E]], %[[E]]
// CHECK: %[[A:.+]] = graph.add %[[M]], %[[C]]
// CHECK: return %[[A]]
func.func @cleanup(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = graph.param "unused" trainable : tensor<8xf32>
  %one = graph.constant dense<1.0> : tensor<4xf32>
  %two = graph.constant dense<2.0> : tensor<4xf32>
  %three = graph.add %one, %two : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e1 = graph.exp %x : tensor<4xf32>
  %e2 = graph.exp %x : tensor<4xf32>
  %dead = graph.sqrt %e1 : tensor<4xf32>
  %m = graph.mul %e1, %e2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = graph.add %m, %three : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

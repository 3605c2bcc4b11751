// RUN: strata-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that the shape sub-graph exporters emit (Shape -> Gather -> Unsqueeze
// -> Concat) folds to one constant.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.+]] = graph.constant dense<[8, 4, 16]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<3xi64> {
  %shape = graph.constant dense<[2, 4, 16]> : tensor<3xi64>
  %idx = graph.constant dense<1> : tensor<i64>
  %d = graph.gather %shape, %idx axis = 0 : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u = graph.reshape %d : tensor<i64> -> tensor<1xi64>
  %two = graph.constant dense<2> : tensor<1xi64>
  %m = graph.mul %u, %two : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %s = graph.slice %shape offsets = [1] strides = [1] : tensor<3xi64> -> tensor<2xi64>
  %c = graph.concat %m, %s axis = 0 : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  return %c : tensor<3xi64>
}

// -----

// Tests Where(Equal(shape, -1), ones, shape), the pattern torch emits for
// Expand, and integer division truncating toward zero.
// CHECK-LABEL: func.func @where_equal
// CHECK-NEXT: %[[C:.+]] = graph.constant dense<[1, -3, 5]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @where_equal() -> tensor<3xi64> {
  %shape = graph.constant dense<[-1, -7, 10]> : tensor<3xi64>
  %neg = graph.constant dense<-1> : tensor<i64>
  %one = graph.constant dense<1> : tensor<3xi64>
  %two = graph.constant dense<2> : tensor<i64>
  %eq = graph.equal %shape, %neg : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %half = graph.div %shape, %two : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %r = graph.select %eq, %one, %half : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %r : tensor<3xi64>
}

// -----

// Tests that a causal mask built from a splat with trilu folds, and that
// splats stay splats through broadcasting.
// CHECK-LABEL: func.func @causal_mask
// CHECK-DAG: graph.constant dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00]]> : tensor<3x3xf32>
// CHECK-DAG: graph.constant dense<2.500000e-01> : tensor<4x3x3xf32>
// CHECK-NOT: graph.trilu
// CHECK-NOT: graph.broadcast
func.func @causal_mask() -> (tensor<3x3xf32>, tensor<4x3x3xf32>) {
  %ones = graph.constant dense<1.0> : tensor<3x3xf32>
  %m = graph.trilu %ones k = 0 : tensor<3x3xf32>
  %q = graph.constant dense<0.25> : tensor<1x3xf32>
  %b = graph.broadcast %q : tensor<1x3xf32> -> tensor<4x3x3xf32>
  return %m, %b : tensor<3x3xf32>, tensor<4x3x3xf32>
}

// -----

// Tests float folding: Cast(Shape) -> Sqrt -> Reciprocal, as in the
// attention scale 1/sqrt(head_dim), rounded to f32.
// CHECK-LABEL: func.func @attention_scale
// CHECK-NEXT: %[[C:.+]] = graph.constant dense<0.353553385> : tensor<f32>
// CHECK-NEXT: return %[[C]]
func.func @attention_scale() -> tensor<f32> {
  %d = graph.constant dense<8> : tensor<i64>
  %f = graph.cast %d : tensor<i64> -> tensor<f32>
  %s = graph.sqrt %f : tensor<f32>
  %r = graph.reciprocal %s : tensor<f32>
  return %r : tensor<f32>
}

// -----

// Tests transpose and strided, reversed slices of constants.
// CHECK-LABEL: func.func @movement
// CHECK-DAG: graph.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>
// CHECK-DAG: graph.constant dense<[6, 4]> : tensor<2xi32>
func.func @movement() -> (tensor<3x2xi32>, tensor<2xi32>) {
  %c = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %t = graph.transpose %c perm = [1, 0] : tensor<2x3xi32> -> tensor<3x2xi32>
  %flat = graph.reshape %c : tensor<2x3xi32> -> tensor<6xi32>
  %s = graph.slice %flat offsets = [5] strides = [-2] : tensor<6xi32> -> tensor<2xi32>
  return %t, %s : tensor<3x2xi32>, tensor<2xi32>
}

// -----

// Tests that no-op data movement folds away on non-constant values.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[R:.+]] = graph.reshape %[[X]] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT: return %[[X]], %[[R]]
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>) {
  %0 = graph.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = graph.transpose %0 perm = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = graph.broadcast %1 : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = graph.cast %2 : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = graph.slice %3 offsets = [0, 0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %5 = graph.reshape %4 : tensor<2x3xf32> -> tensor<6xf32>
  %6 = graph.reshape %5 : tensor<6xf32> -> tensor<3x2xf32>
  return %4, %6 : tensor<2x3xf32>, tensor<3x2xf32>
}

// -----

// Tests that integer division by zero is left for the runtime to report.
// CHECK-LABEL: func.func @div_by_zero
// CHECK: graph.div
func.func @div_by_zero() -> tensor<i64> {
  %a = graph.constant dense<4> : tensor<i64>
  %z = graph.constant dense<0> : tensor<i64>
  %d = graph.div %a, %z : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Tests that gather with negative indices reads from the end, and that a
// parameter is never folded or removed.
// CHECK-LABEL: func.func @gather_negative
// CHECK-DAG: graph.param "unused"
// CHECK-DAG: graph.constant dense<[30, 10]> : tensor<2xi64>
func.func @gather_negative() -> tensor<2xi64> {
  %p = graph.param "unused" : tensor<4xf32>
  %t = graph.constant dense<[10, 20, 30]> : tensor<3xi64>
  %i = graph.constant dense<[-1, 0]> : tensor<2xi64>
  %g = graph.gather %t, %i axis = 0 : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %g : tensor<2xi64>
}

// -----

// Tests that transposes of the last two dimensions fold into matmul's
// transpose flags (toggling them), and that other permutations do not.
// CHECK-LABEL: func.func @fold_transpose_into_matmul
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[W:.+]]: tensor<5x4xf32>, %[[B:.+]]: tensor<3x2x4xf32>)
// CHECK-NEXT: %[[Y:.+]] = graph.matmul %[[X]], %[[W]] {transpose_rhs} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[Z:.+]] = graph.matmul %[[X]], %[[X]] {transpose_lhs} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[T:.+]] = graph.transpose %[[B]] perm = [1, 0, 2]
// CHECK-NEXT: %[[U:.+]] = graph.matmul %[[T]], %{{.+}} :
func.func @fold_transpose_into_matmul(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<3x2x4xf32>) -> (tensor<2x3x5xf32>, tensor<2x4x4xf32>, tensor<2x3x5xf32>) {
  %wt = graph.transpose %w perm = [1, 0] : tensor<5x4xf32> -> tensor<4x5xf32>
  %y = graph.matmul %x, %wt : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %xt = graph.transpose %x perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %z = graph.matmul %xt, %x : (tensor<2x4x3xf32>, tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  %bt = graph.transpose %b perm = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %u = graph.matmul %bt, %wt : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y, %z, %u : tensor<2x3x5xf32>, tensor<2x4x4xf32>, tensor<2x3x5xf32>
}

// -----

// Tests that a transpose of a transpose becomes one transpose of the
// original value with the composed permutation, and none at all when the
// two cancel.
// CHECK-LABEL: func.func @compose_transposes
// CHECK-NEXT: %[[T:.+]] = graph.transpose %arg0 perm = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[T]], %arg0
func.func @compose_transposes(%x: tensor<2x3x4xf32>) -> (tensor<3x4x2xf32>, tensor<2x3x4xf32>) {
  %a = graph.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %b = graph.transpose %a perm = [0, 2, 1] : tensor<3x2x4xf32> -> tensor<3x4x2xf32>
  %c = graph.transpose %x perm = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %d = graph.transpose %c perm = [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %b, %d : tensor<3x4x2xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that the gradient of a tensor split in three along its last axis
// (slice_grads summed, in any order) becomes one concatenation of the
// pieces in window order, with no zero-filled tensor left; and that pieces
// that are not adjacent stay a sum.
// CHECK-LABEL: func.func @split_gradient_is_a_concat
// CHECK-NEXT: %[[C:.+]] = graph.concat %arg0, %arg1, %arg2 axis = 1 : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x9xf32>
// CHECK-NEXT: %[[G:.+]] = graph.slice_grad %arg0 offsets = [0, 0]
// CHECK-NEXT: %[[H:.+]] = graph.slice_grad %arg2 offsets = [0, 6]
// CHECK-NEXT: %[[S:.+]] = graph.add %[[G]], %[[H]]
// CHECK-NEXT: return %[[C]], %[[S]]
func.func @split_gradient_is_a_concat(%q: tensor<2x3xf32>, %k: tensor<2x3xf32>, %v: tensor<2x3xf32>) -> (tensor<2x9xf32>, tensor<2x9xf32>) {
  %gk = graph.slice_grad %k offsets = [0, 3] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x9xf32>
  %gv = graph.slice_grad %v offsets = [0, 6] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x9xf32>
  %gq = graph.slice_grad %q offsets = [0, 0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x9xf32>
  %a = graph.add %gk, %gv : (tensor<2x9xf32>, tensor<2x9xf32>) -> tensor<2x9xf32>
  %b = graph.add %gq, %a : (tensor<2x9xf32>, tensor<2x9xf32>) -> tensor<2x9xf32>
  %x = graph.slice_grad %q offsets = [0, 0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x9xf32>
  %y = graph.slice_grad %v offsets = [0, 6] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x9xf32>
  %s = graph.add %x, %y : (tensor<2x9xf32>, tensor<2x9xf32>) -> tensor<2x9xf32>
  return %b, %s : tensor<2x9xf32>, tensor<2x9xf32>
}

// RUN: strata-opt %s --split-input-file --verify-diagnostics

// Tests that broadcasting ops reject a result of the wrong shape.
func.func @add_wrong_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result shape must be the broadcast shape [2, 3], got [3]}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

// Tests that broadcasting ops reject incompatible shapes.
func.func @add_incompatible(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand shapes do not broadcast}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that operands of an elementwise op must share their element type.
func.func @mixed_types(%a: tensor<3xf32>, %b: tensor<3xi64>) {
  // expected-error @+1 {{operands must have the same element type}}
  %0 = graph.mul %a, %b : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

// Tests that comparisons produce i1.
func.func @compare_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor of 1-bit signless integer values}}
  %0 = graph.equal %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

// Tests that graph ops accept only static shapes.
func.func @dynamic(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = graph.relu %a : tensor<?x3xf32>
  return
}

// -----

// Tests that matmul checks the contracting dimension.
func.func @matmul_k(%a: tensor<2x4xf32>, %b: tensor<5x8xf32>) {
  // expected-error @+1 {{contracting dimensions differ (4 vs 5)}}
  %0 = graph.matmul %a, %b : (tensor<2x4xf32>, tensor<5x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that a count of live rows takes matrices only.
func.func @matmul_rows_batch(%a: tensor<3x2x4xf32>, %b: tensor<4x8xf32>, %n: tensor<i64>) {
  // expected-error @+1 {{with rows, both operands must be matrices}}
  %0 = graph.matmul %a, %b rows %n : (tensor<3x2x4xf32>, tensor<4x8xf32>, tensor<i64>) -> tensor<3x2x8xf32>
  return
}

// -----

// Tests that a count of live rows with a transposed lhs (a contraction over
// the rows) takes a rhs as stored.
func.func @matmul_rows_both_transposed(%a: tensor<4x2xf32>, %b: tensor<8x4xf32>, %n: tensor<i64>) {
  // expected-error @+1 {{with rows and transpose_lhs, the rhs must not be transposed}}
  %0 = graph.matmul %a, %b rows %n {transpose_lhs, transpose_rhs} : (tensor<4x2xf32>, tensor<8x4xf32>, tensor<i64>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that compact_rows' order has the mask's length.
func.func @compact_rows_length(%m: tensor<8xi1>) {
  // expected-error @+1 {{order must have the mask's shape}}
  %o, %c = "graph.compact_rows"(%m) : (tensor<8xi1>) -> (tensor<4xi64>, tensor<i64>)
  return
}

// -----

// Tests that matmul checks its result shape.
func.func @matmul_result(%a: tensor<3x2x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{result shape must be [3, 2, 8]}}
  %0 = graph.matmul %a, %b : (tensor<3x2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that reduction axes must be sorted and in range.
func.func @reduce_axes(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axes must be strictly increasing}}
  %0 = graph.reduce_sum %a axes = [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_axis_range(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = graph.reduce_max %a axes = [2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_sum_square_int(%a: tensor<2x3xi32>) {
  // expected-error @+1 {{squares floating-point tensors only}}
  %0 = graph.reduce_sum_square %a axes = [1] : tensor<2x3xi32> -> tensor<2xi32>
  return
}

// -----

// Tests that the reduction result shape follows keepdims.
func.func @reduce_keepdims(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape must be [2, 1]}}
  %0 = graph.reduce_mean %a axes = [1] keepdims : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// Tests that softmax's axis must be a dimension of its input.
func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis -1 out of range [0, 2)}}
  %0 = graph.softmax %a axis = -1 : tensor<2x3xf32>
  return
}

// -----

// Tests that layer_norm's scale must broadcast to the normalised dimensions.
func.func @layer_norm_scale(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{scale shape does not broadcast to the normalised shape [8]}}
  %0 = graph.layer_norm %x, %g axis = 1 epsilon = 1.0e-05 : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that reshape keeps the element count.
func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{element count must not change}}
  %0 = graph.reshape %x : tensor<2x8xf32> -> tensor<15xf32>
  return
}

// -----

// Tests that transpose needs a permutation.
func.func @transpose_perm(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{perm must be a permutation of [0, rank)}}
  %0 = graph.transpose %x perm = [0, 0] : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}

// -----

// Tests that a slice must stay in bounds.
func.func @slice_bounds(%x: tensor<8xf32>) {
  // expected-error @+1 {{dimension 0 reads out of bounds (offset 4, stride 2, size 3, input size 8)}}
  %0 = graph.slice %x offsets = [4] strides = [2] : tensor<8xf32> -> tensor<3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<8xf32>) {
  // expected-error @+1 {{stride of dimension 0 is zero}}
  %0 = graph.slice %x offsets = [0] strides = [0] : tensor<8xf32> -> tensor<3xf32>
  return
}

// -----

// Tests that concat checks the non-axis dimensions.
func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{inputs differ in dimension 0}}
  %0 = graph.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that broadcast needs a broadcast-compatible target.
func.func @broadcast_shape(%a: tensor<3xf32>) {
  // expected-error @+1 {{input shape [3] does not broadcast to [2, 4]}}
  %0 = graph.broadcast %a : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

// Tests that gather's result shape follows the indices.
func.func @gather_shape(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{result must be [3, 4] of 'f32'}}
  %0 = graph.gather %t, %i axis = 0 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return
}

// -----

// Tests that trilu needs matrices.
func.func @trilu_rank(%a: tensor<3xf32>) {
  // expected-error @+1 {{input must have rank >= 2}}
  %0 = graph.trilu %a k = 0 : tensor<3xf32>
  return
}

// -----

// Tests that a parameter's initial value has the parameter's type.
func.func @param_init() {
  // expected-error @+1 {{initial value type 'tensor<4xf32>' does not match result type 'tensor<8xf32>'}}
  %0 = graph.param "w" {initial_value = dense<0.0> : tensor<4xf32>} : tensor<8xf32>
  return
}

// -----

// Tests that parameters are float tensors.
func.func @param_type() {
  // expected-error @+1 {{must be statically shaped tensor of floating-point values}}
  %0 = graph.param "w" : tensor<8xi64>
  return
}

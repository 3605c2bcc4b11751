// RUN: strata-opt %s --split-input-file --strata-group-experts --verify-diagnostics | FileCheck %s

// Two experts routed as transformers' Mixtral exports them (the importer's
// form: a one-hot of the selected experts permuted to [experts, slots,
// tokens], one class gathered per expert, compact_rows of it, the tokens'
// rows through a product by the expert's weight, scaled, zeroed past the
// count and added into a running total) become one computation over one
// buffer: group_rows of both masks, one grouped product by both weights,
// one scatter-add onto the initial total.
// CHECK-LABEL: func.func @two_experts
// CHECK-NOT: graph.compact_rows
// CHECK: %[[ORDER:.+]], %[[OFFSETS:.+]], %[[COUNT:.+]] = graph.group_rows %{{.+}}, %{{.+}} {expected = 8 : i64} : (tensor<8xi1>, tensor<8xi1>) -> (tensor<8xi64>, tensor<3xi64>, tensor<i64>)
// CHECK: graph.grouped_matmul %{{.+}}, %[[OFFSETS]], %arg2, %arg3 : (tensor<8x2xf32>, tensor<3xi64>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
// CHECK-NOT: graph.matmul
// CHECK: %[[S:.+]] = graph.gather_grad
// CHECK-NOT: graph.gather_grad
// CHECK: %[[T:.+]] = graph.add %[[S]], %{{.+}}
// CHECK: return %[[T]]
// expected-remark @+1 {{routed experts: the 2 experts of 1 router each compute over one buffer of their rows (grouped products; 8 fewer rows planned)}}
func.func @two_experts(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<4x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.add %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2 : tensor<4x3xf32>
}


// -----

// Experts that compute differently stay per expert, and the remark says
// why.
// CHECK-LABEL: func.func @different_ops
// CHECK-COUNT-2: graph.compact_rows
// CHECK-NOT: graph.group_rows
// expected-remark @+1 {{routed experts: 2 experts of a router left as they are (expert 1 computes 'graph.tanh' where expert 0 has 'graph.sigmoid')}}
func.func @different_ops(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<4x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.add %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.tanh %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2 : tensor<4x3xf32>
}


// -----

// An expert's value used outside it (here returned) keeps the experts
// apart.
// CHECK-LABEL: func.func @value_used_outside
// CHECK-NOT: graph.group_rows
// expected-remark @+1 {{routed experts: 2 experts of a router left as they are (a value of expert 1 is used outside it)}}
func.func @value_used_outside(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> (tensor<4x3xf32>, tensor<8x3xf32>) {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.add %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2, %s1 : tensor<4x3xf32>, tensor<8x3xf32>
}


// -----

// Masks that are not classes of a one-hot ("on" equals "off": every class
// holds everywhere) may overlap: no group, no remark.
// CHECK-LABEL: func.func @not_one_hot
// CHECK-COUNT-2: graph.compact_rows
// CHECK-NOT: graph.group_rows
func.func @not_one_hot(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<4x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %one : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.add %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2 : tensor<4x3xf32>
}


// -----

// An expert's value returned alone (the total unused) keeps them apart too.
// CHECK-LABEL: func.func @expert_returned
// CHECK-NOT: graph.group_rows
// expected-remark @+1 {{routed experts: 2 experts of a router left as they are (a value of expert 1 is used outside it)}}
func.func @expert_returned(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<8x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.add %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %s1 : tensor<8x3xf32>
}


// -----

// A running total that is not a sum (the maximum of the experts'
// scatters) is not the scatter of all their rows: left per expert.
// CHECK-LABEL: func.func @max_total
// CHECK-NOT: graph.group_rows
// expected-remark @+1 {{routed experts: 2 experts of a router left as they are (the running total is not a sum)}}
func.func @max_total(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<4x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t1 = graph.max %d0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %t2 = graph.max %t1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2 : tensor<4x3xf32>
}


// -----

// A scatter squared before it is added: the square of the sum over every
// expert's rows is not the sum of the squares. Left per expert.
// CHECK-LABEL: func.func @scatter_reused
// CHECK-NOT: graph.group_rows
// expected-remark @+1 {{routed experts: 2 experts of a router left as they are (an expert's rows are combined other than into the running total)}}
func.func @scatter_reused(%idx: tensor<4x2xi64>, %x: tensor<4x2xf32>, %w0: tensor<2x3xf32>, %w1: tensor<2x3xf32>, %rw: tensor<8xf32>) -> tensor<4x3xf32> {
  %iota = graph.constant dense<[[[0, 1]]]> : tensor<1x1x2xi64>
  %one = graph.constant dense<1> : tensor<i64>
  %zero = graph.constant dense<0> : tensor<i64>
  %fzero = graph.constant dense<0.0> : tensor<f32>
  %coords = graph.constant dense<[[0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3]]> : tensor<2x8xi64>
  %pos = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %total0 = graph.constant dense<0.0> : tensor<4x3xf32>
  %e = graph.reshape %idx : tensor<4x2xi64> -> tensor<4x2x1xi64>
  %hit = graph.equal %e, %iota : (tensor<4x2x1xi64>, tensor<1x1x2xi64>) -> tensor<4x2x2xi1>
  %hot = graph.select %hit, %one, %zero : (tensor<4x2x2xi1>, tensor<i64>, tensor<i64>) -> tensor<4x2x2xi64>
  %mask = graph.transpose %hot perm = [2, 1, 0] : tensor<4x2x2xi64> -> tensor<2x2x4xi64>
  %g0 = graph.gather %mask, %zero axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b0 = graph.cast %g0 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m0 = graph.reshape %b0 : tensor<2x4xi1> -> tensor<8xi1>
  %o0, %c0 = graph.compact_rows %m0 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real0 = graph.less %pos, %c0 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at0 = graph.gather %coords, %o0 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok0 = graph.gather %at0, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows0 = graph.gather %x, %tok0 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h0 = graph.matmul %rows0, %w0 rows %c0 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s0 = graph.sigmoid %h0 : tensor<8x3xf32>
  %k0 = graph.gather %rw, %o0 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k0r = graph.reshape %k0 : tensor<8xf32> -> tensor<8x1xf32>
  %y0 = graph.mul %s0, %k0r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r0 = graph.reshape %real0 : tensor<8xi1> -> tensor<8x1xi1>
  %z0 = graph.select %r0, %y0, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d0 = graph.gather_grad %z0, %tok0 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %q0 = graph.mul %d0, %d0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %t1 = graph.add %q0, %total0 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %g1 = graph.gather %mask, %one axis = 0 : (tensor<2x2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  %b1 = graph.cast %g1 : tensor<2x4xi64> -> tensor<2x4xi1>
  %m1 = graph.reshape %b1 : tensor<2x4xi1> -> tensor<8xi1>
  %o1, %c1 = graph.compact_rows %m1 {expected = 4 : i64} : tensor<8xi1> -> (tensor<8xi64>, tensor<i64>)
  %real1 = graph.less %pos, %c1 : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %at1 = graph.gather %coords, %o1 axis = 1 : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  %tok1 = graph.gather %at1, %one axis = 0 : (tensor<2x8xi64>, tensor<i64>) -> tensor<8xi64>
  %rows1 = graph.gather %x, %tok1 axis = 0 : (tensor<4x2xf32>, tensor<8xi64>) -> tensor<8x2xf32>
  %h1 = graph.matmul %rows1, %w1 rows %c1 : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  %s1 = graph.sigmoid %h1 : tensor<8x3xf32>
  %k1 = graph.gather %rw, %o1 axis = 0 : (tensor<8xf32>, tensor<8xi64>) -> tensor<8xf32>
  %k1r = graph.reshape %k1 : tensor<8xf32> -> tensor<8x1xf32>
  %y1 = graph.mul %s1, %k1r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %r1 = graph.reshape %real1 : tensor<8xi1> -> tensor<8x1xi1>
  %z1 = graph.select %r1, %y1, %fzero : (tensor<8x1xi1>, tensor<8x3xf32>, tensor<f32>) -> tensor<8x3xf32>
  %d1 = graph.gather_grad %z1, %tok1 axis = 0 : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<4x3xf32>
  %q1 = graph.mul %d1, %d1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %t2 = graph.add %t1, %q1 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %t2 : tensor<4x3xf32>
}


// RUN: strata-opt %s --strata-schedule-transfers | FileCheck %s

// Tests that a sharded parameter's gather (unshard, ZeRO stage 3) is issued
// ahead like a fetch: right after the last kernel that touches its
// destination bytes, or after the update that writes its shard, and in
// program order when that is the kernel just before it.
// CHECK-LABEL: func.func @main
// The forward gather reuses %a's bytes; %a is last read by kernel 1.
// CHECK: exec.kernel "unshard"(%[[S:.+]]) {ints = array<i64: 2>, issue_after = 1 : i64, offset = 64 : i64}
// The gather after the update of its shard follows it: in order.
// CHECK: exec.kernel "update_sgd"
// CHECK-NEXT: exec.kernel "unshard"(%[[S]]) {ints = array<i64: 2>, offset = 320 : i64}
// The gather of t conflicts with nothing: at the start of the step.
// CHECK: exec.kernel "unshard"(%{{.+}}) {ints = array<i64: 2>, issue_after = -1 : i64, offset = 448 : i64}
func.func @main() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<4xf32>
  %g = exec.input "g" {offset = 576 : i64} : tensor<2xf32>
  %s = exec.param "s" trainable {offset = 0 : i64, value = dense<1.0> : tensor<4xf32>, shard_ranks = 2 : i64} : tensor<2xf32>
  %t = exec.param "t" trainable {offset = 64 : i64, value = dense<1.0> : tensor<4xf32>, shard_ranks = 2 : i64} : tensor<2xf32>
  %lr = exec.param "lr" constant {offset = 128 : i64, value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = exec.kernel "exp"(%a) {offset = 128 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %c = exec.kernel "exp"(%b) {offset = 192 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %sw = exec.kernel "unshard"(%s) {ints = array<i64: 2>, offset = 64 : i64} : (tensor<2xf32>) -> tensor<4xf32>
  %d = exec.kernel "add"(%c, %sw) {offset = 256 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_sgd"(%s, %g, %lr) {floats = array<f64: 0.1, 0.0>, ints = array<i64: 1>} : (tensor<2xf32>, tensor<2xf32>, tensor<f32>) -> ()
  %sw2 = exec.kernel "unshard"(%s) {ints = array<i64: 2>, offset = 320 : i64} : (tensor<2xf32>) -> tensor<4xf32>
  %e = exec.kernel "add"(%sw2, %d) {offset = 384 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %tw = exec.kernel "unshard"(%t) {ints = array<i64: 2>, offset = 448 : i64} : (tensor<2xf32>) -> tensor<4xf32>
  %f = exec.kernel "add"(%tw, %e) {offset = 512 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.output "f" %f : tensor<4xf32>
  return
}

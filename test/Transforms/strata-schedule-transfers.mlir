// RUN: strata-opt %s --strata-schedule-transfers | FileCheck %s
// RUN: strata-opt %s --strata-schedule-transfers="lookahead=2" | FileCheck %s --check-prefix=NEAR

// Tests that a fetch is issued right after the last kernel that touches its
// destination bytes or writes its source, and not at all ahead when that is
// the kernel just before it.
// CHECK-LABEL: func.func @main
// The fetch of w reuses %a's bytes; %a is last read by kernel 1.
// CHECK: exec.kernel "copy"(%{{.+}}) {issue_after = 1 : i64, offset = 64 : i64}
// The fetch of v follows the write-back of v: it stays in order.
// CHECK: exec.kernel "copy"(%{{.+}}) {offset = 320 : i64}
// The fetch of u conflicts with nothing: it starts with the step.
// CHECK: exec.kernel "copy"(%{{.+}}) {issue_after = -1 : i64, offset = 448 : i64}

// NEAR-LABEL: func.func @main
// NEAR: exec.kernel "copy"(%{{.+}}) {issue_after = 1 : i64, offset = 64 : i64}
// NEAR: exec.kernel "copy"(%{{.+}}) {offset = 320 : i64}
// NEAR: exec.kernel "copy"(%{{.+}}) {issue_after = 5 : i64, offset = 448 : i64}
func.func @main() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %v = exec.param "v" trainable {tier = #exec.tier<host>, offset = 64 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %u = exec.param "u" {tier = #exec.tier<host>, offset = 128 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %a = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = exec.kernel "exp"(%a) {offset = 128 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %c = exec.kernel "exp"(%b) {offset = 192 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %wf = exec.kernel "copy"(%w) {offset = 64 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %d = exec.kernel "add"(%c, %wf) {offset = 256 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "assign"(%v, %d) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %vf = exec.kernel "copy"(%v) {offset = 320 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %e = exec.kernel "add"(%vf, %x) {offset = 384 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %uf = exec.kernel "copy"(%u) {offset = 448 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %f = exec.kernel "add"(%uf, %e) {offset = 512 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  exec.output "f" %f : tensor<4xf32>
  return
}

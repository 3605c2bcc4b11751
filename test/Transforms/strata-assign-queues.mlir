// RUN: strata-opt %s --strata-schedule-transfers --strata-assign-queues | FileCheck %s

// Tests that every kernel gets its queue (kernels on compute, host fetches
// on h2d, write-backs to the host on d2h, SSD fetches on ssd-read) and the
// waits that order conflicting steps on different queues: read after write
// (a kernel after its fetch), write after read (a fetch into bytes a kernel
// still reads), and a fetch after the write-back of the same stored value.
// CHECK-LABEL: func.func @main
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 64 : i64, queue = #exec.queue<compute>}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 128 : i64, queue = #exec.queue<compute>}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 192 : i64, queue = #exec.queue<compute>}
// The fetch of w reuses %a's bytes, which kernel 1 reads.
// CHECK: exec.kernel "copy"(%{{.+}}) {issue_after = 1 : i64, offset = 64 : i64, queue = #exec.queue<h2d>, waits = array<i64: 1>}
// CHECK: exec.kernel "add"(%{{.+}}, %{{.+}}) {offset = 256 : i64, queue = #exec.queue<compute>, waits = array<i64: 3>}
// The write-back reads the add's result; the fetch of v reads what it wrote.
// CHECK: exec.kernel "assign"(%{{.+}}, %{{.+}}) {queue = #exec.queue<d2h>, waits = array<i64: 4>}
// CHECK: exec.kernel "copy"(%{{.+}}) {offset = 320 : i64, queue = #exec.queue<h2d>, waits = array<i64: 5>}
// CHECK: exec.kernel "add"(%{{.+}}, %{{.+}}) {offset = 384 : i64, queue = #exec.queue<compute>, waits = array<i64: 6>}
// The SSD fetch starts with the step and waits for nothing.
// CHECK: exec.kernel "copy"(%{{.+}}) {issue_after = -1 : i64, offset = 448 : i64, queue = #exec.queue<ssd_read>}
// CHECK: exec.kernel "add"(%{{.+}}, %{{.+}}) {offset = 512 : i64, queue = #exec.queue<compute>, waits = array<i64: 8>}
func.func @main() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %v = exec.param "v" trainable {tier = #exec.tier<host>, offset = 64 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %u = exec.param "u" {tier = #exec.tier<ssd>, offset = 4096 : i64, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
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

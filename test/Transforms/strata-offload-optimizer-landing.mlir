// RUN: strata-opt %s --strata-offload-optimizer="place-updates=auto cpu-job-bytes=0 cpu-mem=53248 profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --strata-offload-optimizer="place-updates=auto cpu-job-bytes=0 cpu-mem=49152 profile=%S/Inputs/profile.txt" --verify-diagnostics | FileCheck %s --check-prefix=TIGHT
// RUN: strata-opt %s --strata-offload-optimizer="place-updates=auto cpu-job-bytes=0 cpu-mem=61440 profile=%S/Inputs/profile.txt" | FileCheck %s --check-prefix=ROOM

// Tests the host memory the CPU updates' gradients land in: a few buffers
// per tensor type, reused by later jobs, are what counts against the host
// budget, not one buffer per update. Five updates of 4x4xf32 parameters,
// each with its state on the host (ten pages), each its own CPU job
// (cpu-job-bytes=0): with 13 pages all five move to the CPU and land in
// three buffers, the fourth and fifth reusing the first two; with 12
// pages only two buffers fit, so the first two updates move and the
// other three stay on the device. With 15 pages every gradient has a
// buffer of its own (the pools grow while the budget has room), and no
// store waits for the CPU.
// CHECK-LABEL: func.func @pooled_landing
// CHECK-SAME: cpu_updates = 5 : i64, device_updates = 0 : i64
// CHECK-DAG: %[[G0:.+]] = exec.swap_space "cpu-update.grad.0" {tier = #exec.tier<host>}
// CHECK-DAG: %[[G1:.+]] = exec.swap_space "cpu-update.grad.1" {tier = #exec.tier<host>}
// CHECK-DAG: %[[G2:.+]] = exec.swap_space "cpu-update.grad.2" {tier = #exec.tier<host>}
// CHECK-NOT: "cpu-update.grad.3"
// CHECK: exec.kernel "store"(%[[G0]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%{{.+}}, %[[G0]], %{{.+}})
// CHECK: exec.kernel "store"(%[[G1]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%{{.+}}, %[[G1]], %{{.+}})
// CHECK: exec.kernel "store"(%[[G2]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%{{.+}}, %[[G2]], %{{.+}})
// CHECK: exec.kernel "store"(%[[G0]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%{{.+}}, %[[G0]], %{{.+}})
// CHECK: exec.kernel "store"(%[[G1]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%{{.+}}, %[[G1]], %{{.+}})
// ROOM-LABEL: func.func @pooled_landing
// ROOM-SAME: cpu_updates = 5 : i64
// ROOM-COUNT-5: exec.swap_space "cpu-update.grad.
// ROOM-NOT: exec.swap_space
// TIGHT-LABEL: func.func @pooled_landing
// TIGHT-SAME: cpu_updates = 2 : i64, device_updates = 3 : i64
// TIGHT-NOT: "cpu-update.grad.2"
// expected-remark @below {{3 updates stay on the device: their gradients would take host memory past --cpu-mem}}
func.func @pooled_landing() {
  %x = exec.input "x" : tensor<4x4xf32>
  %w0 = exec.param "w0" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m0 = exec.param "w0.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w1 = exec.param "w1" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m1 = exec.param "w1.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w2 = exec.param "w2" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m2 = exec.param "w2.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w3 = exec.param "w3" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m3 = exec.param "w3.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w4 = exec.param "w4" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m4 = exec.param "w4.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %u0 = exec.kernel "copy"(%w0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y0 = exec.kernel "matmul"(%x, %u0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u1 = exec.kernel "copy"(%w1) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y1 = exec.kernel "matmul"(%x, %u1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u2 = exec.kernel "copy"(%w2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y2 = exec.kernel "matmul"(%x, %u2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u3 = exec.kernel "copy"(%w3) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y3 = exec.kernel "matmul"(%x, %u3) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u4 = exec.kernel "copy"(%w4) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y4 = exec.kernel "matmul"(%x, %u4) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g4 = exec.kernel "exp"(%y4) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %f4 = exec.kernel "copy"(%w4) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm4 = exec.kernel "copy"(%m4) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{2 of 5 updates run on the CPU}}
  exec.kernel "update_momentum"(%f4, %g4, %fm4) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w4, %f4) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m4, %fm4) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %g3 = exec.kernel "exp"(%y3) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %f3 = exec.kernel "copy"(%w3) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm3 = exec.kernel "copy"(%m3) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%f3, %g3, %fm3) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w3, %f3) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m3, %fm3) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %g2 = exec.kernel "exp"(%y2) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %f2 = exec.kernel "copy"(%w2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm2 = exec.kernel "copy"(%m2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%f2, %g2, %fm2) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w2, %f2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m2, %fm2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %g1 = exec.kernel "exp"(%y1) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %f1 = exec.kernel "copy"(%w1) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm1 = exec.kernel "copy"(%m1) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%f1, %g1, %fm1) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w1, %f1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m1, %fm1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %g0 = exec.kernel "exp"(%y0) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %f0 = exec.kernel "copy"(%w0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm0 = exec.kernel "copy"(%m0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%f0, %g0, %fm0) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w0, %f0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m0, %fm0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %gx = exec.kernel "exp"(%x) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.output "gx" %gx : tensor<4x4xf32>
  return
}
